/* The names of the offload tiers (offload.h). */
#include "offload.h"

const char *const zt_offload_tier_names[4] = {"none", "cpu", "nvme", "auto"};
