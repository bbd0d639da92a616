/* core/real: the element type of the CPU compute path.
 *
 * Float everywhere, except in the gradient-check test build, which compiles the
 * CPU kernels, the backend and the model with -DZT_REAL_DOUBLE so that finite
 * differences in double precision check the very same code (one source, two types).
 */
#ifndef ZT_CORE_REAL_H
#define ZT_CORE_REAL_H

#include "dtype.h"

#ifdef ZT_REAL_DOUBLE
typedef double zt_real;
#define ZT_REAL_DTYPE ZT_F64
#else
typedef float zt_real;
#define ZT_REAL_DTYPE ZT_F32
#endif

#endif
