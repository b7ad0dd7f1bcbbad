# The allowed arrows between our folders, and the headers each folder offers the others.
# Read by the top-level CMakeLists.txt and by check_includes.cmake, which fails the build when a
# file includes another folder's header against these lists.
#
# Data flows one way: hostfiles -> mapper -> topology file (comm) -> launcher (lsf plugs into
# it) -> ddlrun; libddl (comm) depends on no other folder; base/ lies below them all.
# DDL_USES_<folder>: the folders its files may include. DDL_OFFERS_<folder>: the headers other
# folders may include ("*" after a folder name: any of its headers, for the base/ toolbox).
# Folders not listed here (tests, bench, examples, python, cmake) may include anything.

set(DDL_COMPONENTS base hostfiles comm ssh mapper launcher lsf ddlrun)

set(DDL_USES_base "")
set(DDL_USES_hostfiles base)
set(DDL_USES_comm base)
set(DDL_USES_ssh base)
set(DDL_USES_mapper base hostfiles comm ssh)
set(DDL_USES_launcher base hostfiles comm ssh)
set(DDL_USES_lsf base hostfiles comm ssh mapper launcher)
set(DDL_USES_ddlrun base hostfiles comm ssh mapper launcher lsf)

set(DDL_OFFERS_base "base/*")
set(DDL_OFFERS_hostfiles hostfiles/host_list.h hostfiles/input_error.h hostfiles/rankfile.h)
set(DDL_OFFERS_comm comm/topology.h comm/mode.h comm/bootstrap/bootstrap.h)
set(DDL_OFFERS_ssh "ssh/*")
set(DDL_OFFERS_mapper mapper/inventory.h mapper/placement.h mapper/place.h mapper/probe_ssh.h
    mapper/probe_hwloc.h mapper/racks.h mapper/nic_filter.h mapper/machine.h)
set(DDL_OFFERS_launcher launcher/factory.h launcher/backend.h launcher/job.h launcher/external.h
    launcher/choose.h launcher/process.h launcher/keeper.h launcher/supervise.h
    launcher/rank_exec.h)
set(DDL_OFFERS_lsf lsf/jsrun.h lsf/probe_jsrun.h)
set(DDL_OFFERS_ddlrun "")
