#ifndef CSIMSUPPORT_H
#define CSIMSUPPORT_H
int simsupport_placeholder(void);
#endif
