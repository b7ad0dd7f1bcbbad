#include <iostream>

#include "ddlrun/app.h"

int main(int argc, char** argv) {
  return ddl::cli::run(std::vector<std::string>(argv + 1, argv + argc), std::cout, std::cerr);
}
