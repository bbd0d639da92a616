/* core/version: the zt version, and the git commit the Makefile passes in. */
#ifndef ZT_CORE_VERSION_H
#define ZT_CORE_VERSION_H

#define ZT_VERSION "0.1.0"
#ifndef ZT_COMMIT
#define ZT_COMMIT "unknown"
#endif

#endif
