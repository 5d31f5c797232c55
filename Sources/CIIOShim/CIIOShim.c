#include "CIIOShim.h"
#include <iio.h>

/* In C because iio_library_get_version fills out-parameters including a char buffer. */
int iioshim_library_version(void)
{
	unsigned int major = 0, minor = 0;
	char tag[8];
	iio_library_get_version(&major, &minor, tag);
	return (int)(major * 100 + minor);
}
