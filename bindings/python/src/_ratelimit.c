/* Transitional: compiles the binding's parts as one unit for a setup.py that
 * lists only this file. The parts are separate compilation units (module.c,
 * errors.c, util.c, client.c, limiter.c, sync.c, sharing module.h); once
 * setup.py lists them, this file goes. */
#include "module.c"
#include "errors.c"
#include "util.c"
#include "client.c"
#include "limiter.c"
#include "sync.c"
