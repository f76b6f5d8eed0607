/* ftl command line: dispatches `ftl <command>` to one file per subcommand. */
#include "ftl.h"

#include <stdio.h>
#include <string.h>

int main(int argc, char **argv) {
    if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "help") == 0) {
        printf("ftl %s\n", FTL_VERSION);
        return argc < 2 ? 2 : 0;
    }
    if (strcmp(argv[1], "--version") == 0) {
        printf("ftl %s\n", FTL_VERSION);
        return 0;
    }
    fprintf(stderr, "ftl: error: unknown command '%s'\n", argv[1]);
    return 2;
}
