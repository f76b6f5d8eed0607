/* Replays inputs through a fuzz target without libFuzzer (gcc, ASan+UBSan): `make test` runs the
 * saved regression inputs this way. usage: fuzz_TARGET_replay FILE... ; prints `ok FILE` for each
 * (a crash, leak or sanitizer report aborts the process, which the test runner reports). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int main(int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        FILE *f = fopen(argv[i], "rb");
        if (!f) {
            printf("FAIL %s: cannot open\n", argv[i]);
            return 1;
        }
        fseek(f, 0, SEEK_END);
        long n = ftell(f);
        fseek(f, 0, SEEK_SET);
        uint8_t *buf = malloc(n > 0 ? (size_t)n : 1);
        size_t got = n > 0 ? fread(buf, 1, (size_t)n, f) : 0;
        fclose(f);
        LLVMFuzzerTestOneInput(buf, got);
        free(buf);
        printf("ok %s\n", argv[i]);
        fflush(stdout);
    }
    return 0;
}
