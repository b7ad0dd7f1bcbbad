# The allowed arrows between our folders, and the headers each folder offers the others.
# Read by the top-level CMakeLists.txt and by check_includes.cmake, which fails the build when a
# file includes another folder's header against these lists.
#
# Data flows one way: hostfiles -> mapper -> topology file (comm) -> launcher (lsf plugs into
# it) -> ddlrun; libddl (comm) depends on no other folder; base/ lies below them all.
# DDL_USES_<folder>: the folders its files may include. DDL_OFFERS_<folder>: the one header
# other folders may include ("*" after a folder name: any of its headers, for the base/
# toolbox; ddlrun/ is the program and offers none).
# Folders not listed here (tests, bench, examples, python, cmake) may include anything.

set(DDL_COMPONENTS base hostfiles comm ssh mapper launcher lsf ddlrun)

set(DDL_USES_base "")
set(DDL_USES_hostfiles base)
set(DDL_USES_comm base)
set(DDL_USES_ssh base)
set(DDL_USES_mapper base hostfiles comm)
set(DDL_USES_launcher base hostfiles comm ssh)
set(DDL_USES_lsf base hostfiles comm ssh mapper launcher)
set(DDL_USES_ddlrun base hostfiles comm ssh mapper launcher lsf)

set(DDL_OFFERS_base "base/*")
set(DDL_OFFERS_hostfiles hostfiles/hostfiles.h)
set(DDL_OFFERS_comm comm/comm.h)
set(DDL_OFFERS_ssh ssh/session.h)
set(DDL_OFFERS_mapper mapper/mapper.h)
set(DDL_OFFERS_launcher launcher/launcher.h)
set(DDL_OFFERS_lsf lsf/lsf.h)
set(DDL_OFFERS_ddlrun "")
