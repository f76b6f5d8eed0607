/* A backbone as the inputs of a job: its ONNX file and the external-data files it names. */
#include "nn/onnx/backbone_files.h"
#include "nn/onnx/onnx_import.h"
#include "util/alloc.h"
#include "util/fsutil.h"

#include <stdlib.h>

void nn_io_check_backbone(ftl_io_check *c, const char *role, const char *path) {
    if (!path || !*path) return;
    ftl_io_check_input(c, role, path);
    char *folder = ftl_path_folder(path);
    /* the external files are listed only when an output goes beside the model (parsing costs a read) */
    ftl_string_list files = {0};
    if (ftl_io_check_writes_into(c, folder) && !ftl_is_directory(path) && nn_onnx_external_files(path, &files) == FTL_OK) {
        for (int64_t i = 0; i < files.count; i++) {
            char *role_of_file = ftl_format("%s's external data", role);
            ftl_io_check_input(c, role_of_file, files.items[i]);
            free(role_of_file);
        }
    }
    ftl_string_list_free(&files);
    free(folder);
}
