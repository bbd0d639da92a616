#include <stdio.h>

#include "commands.h"
#include "lib/core/version.h"

int cmd_version(int argc, char **argv)
{
    printf("zt %s (%s)\n", ZT_VERSION, ZT_COMMIT);
    return 0;
}
