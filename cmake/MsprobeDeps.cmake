# Every dependency is a Debian package; a missing one stops configure and names it.
find_package(PkgConfig)
if(NOT PKG_CONFIG_FOUND)
  message(FATAL_ERROR "pkg-config not found: apt-get install pkg-config")
endif()

function(msp_require_pkg var module debpkg)
  pkg_check_modules(${var} QUIET IMPORTED_TARGET ${module})
  if(NOT ${var}_FOUND)
    message(FATAL_ERROR "${module} not found: apt-get install ${debpkg}")
  endif()
  message(STATUS "Found ${module} ${${var}_VERSION}")
endfunction()

msp_require_pkg(HDF5 hdf5 libhdf5-dev)
msp_require_pkg(CJSON libcjson libcjson-dev)
msp_require_pkg(LIBZIP libzip libzip-dev)
msp_require_pkg(XLSX xlsxwriter libxlsxwriter-dev)
msp_require_pkg(ZLIB zlib zlib1g-dev)
# ISA-L's deflate (igzip) for the big sheets of the compare workbooks: five
# times zlib's level 1 (src/report/rep_sheet.c).
msp_require_pkg(ISAL libisal libisal-dev)
# config_check's SHA-256 and HMAC (libzip links libcrypto already).
msp_require_pkg(CRYPTO libcrypto libssl-dev)

# libcsv (csv files read back) has no pkg-config file: Msp::CSV by hand.
find_path(MSP_CSV_INCLUDE_DIR csv.h)
find_library(MSP_CSV_LIBRARY csv)
if(NOT MSP_CSV_INCLUDE_DIR OR NOT MSP_CSV_LIBRARY)
  message(FATAL_ERROR "libcsv not found: apt-get install libcsv-dev")
endif()
add_library(Msp::CSV UNKNOWN IMPORTED)
set_target_properties(Msp::CSV PROPERTIES IMPORTED_LOCATION ${MSP_CSV_LIBRARY}
                      INTERFACE_INCLUDE_DIRECTORIES ${MSP_CSV_INCLUDE_DIR})
message(STATUS "Found libcsv: ${MSP_CSV_LIBRARY}")
# YAML files (data_mapping.yaml, merge_result's config).
msp_require_pkg(YAML yaml-0.1 libyaml-dev)
# The XML of compare workbooks read back (merge_result).
msp_require_pkg(EXPAT expat libexpat1-dev)

find_package(OpenMP COMPONENTS C)
if(NOT OpenMP_C_FOUND)
  message(FATAL_ERROR "OpenMP not found: apt-get install gcc (libgomp1)")
endif()

find_package(Threads REQUIRED)

# Chart.js draws the charts of the HTML reports; its minified build is embedded
# into msprobe at build time (src/common), so a report never loads it at run time.
find_file(MSP_CHARTJS chart.min.js PATHS /usr/share/javascript/chart.js NO_DEFAULT_PATH)
if(NOT MSP_CHARTJS)
  message(FATAL_ERROR "Chart.js not found: apt-get install libjs-chart.js")
endif()

# Python headers only: the Python-side library never links libpython.
pkg_check_modules(PYDEV QUIET python3)
if(NOT PYDEV_FOUND)
  message(FATAL_ERROR "Python headers not found: apt-get install python3-dev")
endif()
message(STATUS "Python headers: ${PYDEV_INCLUDE_DIRS}")

# MPI (Debian: openmpi-bin libopenmpi-dev) for `mpirun msprobe compare`: used
# when found, left out otherwise (msprobe-compare(1), MPI).
option(MSPROBE_MPI "Build compare's MPI support when MPI is found" ON)
set(MSP_HAVE_MPI OFF)
if(MSPROBE_MPI)
  find_package(MPI COMPONENTS C QUIET)
  if(MPI_C_FOUND)
    set(MSP_HAVE_MPI ON)
    find_program(MSP_MPIRUN NAMES mpirun mpiexec HINTS ${MPI_C_COMPILER_DIR})
    message(STATUS "MPI: ${MPI_C_LIB_NAMES} ${MPI_C_VERSION} (compare across nodes; mpirun: ${MSP_MPIRUN})")
  else()
    message(STATUS "MPI not found: compare runs on one machine (apt-get install libopenmpi-dev openmpi-bin)")
  endif()
endif()
