#include "CSimSupport.h"
int simsupport_placeholder(void) { return 0; }
