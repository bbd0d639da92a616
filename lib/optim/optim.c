/* The optimizers' names (optim.h). */
#include "lib/optim/optim.h"

const char *const zt_optim_names[2] = {"adamw_torch", "adamw_8bit"};
