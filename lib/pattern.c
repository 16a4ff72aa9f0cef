/* pattern.c - placeholder until its module lands. */
#include "util.h"
