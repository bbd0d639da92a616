/* The names of model.device (backend.h), apart from the backends so that the recipe's
 * schema can link without them. */
#include "backend.h"

const char *const zt_device_names[3] = {"auto", "cpu", "cuda"};
