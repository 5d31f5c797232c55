#ifndef CMOSQUITTO_SHIM_H
#define CMOSQUITTO_SHIM_H
#include <mosquitto.h>
#endif
