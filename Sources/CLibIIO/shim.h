#ifndef CLIBIIO_SHIM_H
#define CLIBIIO_SHIM_H
#include <iio.h>
#endif
