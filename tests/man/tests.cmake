# The man pages render and document what they must.

# The man page renders without warnings and has its sections.
add_test(NAME man.renders COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/man/check_man.sh
                                  ${PROJECT_SOURCE_DIR}/man/ddlrun.1
                                  NAME SYNOPSIS DESCRIPTION OPTIONS SECURITY "EXIT STATUS"
                                  ENVIRONMENT EXAMPLES)
# The SECURITY sections of ddlrun(1) and libddl(3) name each listener's option and variable,
# and every option they name is ddlrun's (--help), every variable one the sources use.
add_test(NAME man.security COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/man/check_security.sh
                                   $<TARGET_FILE:ddlrun> ${PROJECT_SOURCE_DIR})
add_test(NAME man.topology_renders
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/man/check_man.sh ${PROJECT_SOURCE_DIR}/man/ddl-topology.5
                 NAME DESCRIPTION FORMAT VERSIONS VALIDATION EXAMPLES)

# libddl(3) renders and documents what a library page must.
add_test(NAME man.libddl_renders
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/man/check_man.sh ${PROJECT_SOURCE_DIR}/man/libddl.3
                 NAME LIBRARY SYNOPSIS DESCRIPTION "RETURN VALUE" "C++ INTERFACE"
                 "FINDING THE OTHER RANKS" ALGORITHMS TRANSPORTS "THREAD SAFETY" SECURITY
                 ENVIRONMENT EXAMPLES BUILDING "SEE ALSO")
