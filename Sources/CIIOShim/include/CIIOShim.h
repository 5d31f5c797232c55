#ifndef CIIOSHIM_H
#define CIIOSHIM_H
/* The only code in this package that calls libiio. See CIIOShim.c. */
#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>

/* Returns libiio's version as major*100 + minor (e.g. 24 for 0.24). */
int iioshim_library_version(void);

#endif
