/* src/nn/cpu/emit_node.c's unit test: every op case of tests/ref/nn_cases.py belongs to exactly one
 * emitter family, whose test (test_emit_<family>.c, test_cpu_compile.c) runs it against ONNX Runtime:
 * a new case without a family fails here instead of going untested. */
#include "nn_op_cases.h"
#include "test.h"
#include "util/alloc.h"

#include <stdlib.h>
#include <string.h>

TEST(emit_node_every_op_case_has_one_family) {
    char *dir = ftl_format("%s/ref/nn/ops", ftl_test_build_dir());
    char *text = nn_manifest_read(dir);
    if (!text) {
        free(dir);
        return;
    }
    int cases = 0;
    for (char *save = NULL, *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        nn_manifest_case mc;
        int matches;
        if (!nn_manifest_parse(line, &mc)) continue;
        cases++;
        nn_op_case_family(mc.name, &matches);
        if (matches != 1)
            ftl_test_fail(__FILE__, __LINE__, "op case %s matches %d emitter families (tests/unit/nn_op_cases.c): want 1",
                          mc.name, matches);
    }
    if (cases < 60) ftl_test_fail(__FILE__, __LINE__, "only %d cases in %s/manifest.txt", cases, dir);
    printf("  %d op cases, each in one family\n", cases);
    free(text);
    free(dir);
}
