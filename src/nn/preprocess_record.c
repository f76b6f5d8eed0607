/* The preprocessing record of a model's features (feature files, the feature cache's key): the
 * scaling and the model's input it feeds. Apart from preprocess.c, which the model itself calls. */
#include "ftl/nn.h"
#include "util/alloc.h"

#include <stdio.h>

char *ftl_nn_preprocess_json(const ftl_nn_preprocess *p, const ftl_model *m, int image_size) {
    const ftl_model_info *info = ftl_model_get_info(m);
    bool resize = image_size != info->height || image_size != info->width;
    char buf[1024];
    snprintf(buf, sizeof buf,
             "{\"scale\":\"%s\",\"formula\":\"%s\",\"mean\":[%.9g,%.9g,%.9g],\"std\":[%.9g,%.9g,%.9g],"
             "\"channel_order\":\"RGB\",\"layout\":\"%s\",\"input\":[%d,%d,%d],\"image_size\":%d,"
             "\"resize\":\"%s\",\"dtype\":\"float32\"}",
             ftl_nn_scale_name(p->scale), p->scale == FTL_NN_SCALE_TF ? "x = q/127.5 - 1" : "x = (q/255 - mean[c]) / std[c]",
             p->mean[0], p->mean[1], p->mean[2], p->std[0], p->std[1], p->std[2], info->channels_last ? "NHWC" : "NCHW",
             info->channels, info->height, info->width, image_size,
             resize ? "bilinear (Pillow Image.resize BILINEAR, antialiased)" : "none");
    return ftl_strdup(buf);
}
