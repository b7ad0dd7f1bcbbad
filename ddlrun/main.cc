#include <iostream>

#include "ddlrun/app.h"
#include "ddlrun/plan.h"
#include "launcher/launcher.h"

int main(int argc, char** argv) {
  // Only the ddlrun program arms the keeper (`ddlrun --keeper`, keeper.h): code that calls
  // run() in-process, such as the unit tests, is not a program that knows --keeper.
  ddl::launcher::enable_keeper(ddl::cli::self_path());
  return ddl::cli::run(std::vector<std::string>(argv + 1, argv + argc), std::cout, std::cerr);
}
