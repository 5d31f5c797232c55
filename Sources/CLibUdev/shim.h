#ifndef CLIBUDEV_SHIM_H
#define CLIBUDEV_SHIM_H
#include <libudev.h>
#endif
