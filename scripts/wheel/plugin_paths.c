/* libddl_plugin_paths.so: the binary wheel's PMIx and hwloc load their plugins from the wheel.
 *
 * How it works: scripts/build_wheel copies Debian's PMIx and hwloc, with the plugins they open
 * themselves, into the wheel's ddl/lib (plugins in ddl/lib/pmix and ddl/lib/hwloc), and adds
 * this library to the copied libpmix's and libhwloc's DT_NEEDED. The dynamic linker runs a
 * library's constructor before those of the libraries that need it, so this one runs before
 * PMIx or hwloc can read their variables: it finds its own folder (dladdr) and points
 * PMIx's plugin folder (PMIX_PKGLIBDIR, which replaces the folder compiled into Debian's PMIx,
 * and PMIX_MCA_mca_base_component_path, searched besides it) and HWLOC_PLUGINS_PATH at the
 * folders beside it. PMIx thus never opens the plugins of a PMIx of the host's (another
 * version), wherever the wheel is installed, in ddlrun and in every rank it starts (which
 * inherit the variables as well). A path already set to another folder is replaced: the plugins
 * must be those of this PMIx. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Sets `name` to `folder`/`sub` unless it already says so. */
static void point_at(const char* name, const char* folder, const char* sub) {
  char path[PATH_MAX];
  if (snprintf(path, sizeof path, "%s/%s", folder, sub) >= (int)sizeof path) return;
  const char* now = getenv(name);
  if (now == NULL || strcmp(now, path) != 0) setenv(name, path, 1);
}

__attribute__((constructor)) static void ddl_wheel_plugin_paths(void) {
  Dl_info info;
  char folder[PATH_MAX];
  if (dladdr((void*)&ddl_wheel_plugin_paths, &info) == 0 || info.dli_fname == NULL) return;
  if (realpath(info.dli_fname, folder) == NULL) return;
  char* slash = strrchr(folder, '/');
  if (slash == NULL) return;
  *slash = '\0';
  point_at("PMIX_PKGLIBDIR", folder, "pmix");
  point_at("PMIX_MCA_mca_base_component_path", folder, "pmix");
  point_at("HWLOC_PLUGINS_PATH", folder, "hwloc");
}
