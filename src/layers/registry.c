/* The layer types by cfg section name: one table, Darknet's short aliases
 * right after the name they stand for; the list in messages comes from it. */
#include <string.h>

#include "base/strlist.h"
#include "layers/layer.h"

static const struct {
    const char *name;
    const st_layer_ops *ops;
} layer_types[] = {
    {"convolutional", &st_conv_ops}, {"conv", &st_conv_ops},
    {"connected", &st_connected_ops}, {"conn", &st_connected_ops},
    {"maxpool", &st_maxpool_ops}, {"max", &st_maxpool_ops},
    {"avgpool", &st_avgpool_ops}, {"avg", &st_avgpool_ops},
    {"dropout", &st_dropout_ops},
    {"softmax", &st_softmax_ops}, {"soft", &st_softmax_ops},
    {"cost", &st_cost_ops},
    {"batchnorm", &st_batchnorm_ops},
    {"lrn", &st_lrn_ops},
    {"shortcut", &st_shortcut_ops},
    {"route", &st_route_ops},
    {"crop", &st_crop_ops},
};

#define N_TYPES (sizeof layer_types / sizeof layer_types[0])

/* Entry i is a type's own name, not an alias of the one before. */
static int is_name(size_t i)
{
    return i == 0 || layer_types[i].ops != layer_types[i - 1].ops;
}

const char *st_layer_short_name(const st_layer *l)
{
    return l->ops->short_name ? l->ops->short_name : l->ops->type;
}

int st_layer_model_parallel(const st_layer *l)
{
    return l->ops->model_parallel && l->ops->model_parallel(l);
}

const st_layer_ops *st_layer_find(const char *section_type)
{
    for (size_t i = 0; i < N_TYPES; i++)
        if (strcmp(layer_types[i].name, section_type) == 0)
            return layer_types[i].ops;
    return NULL;
}

void st_layer_type_list(char *buf, size_t size)
{
    size_t n = 0, k = 0;
    for (size_t i = 0; i < N_TYPES; i++)
        n += (size_t)is_name(i);
    buf[0] = '\0';
    for (size_t i = 0; i < N_TYPES; i++)
        if (is_name(i))
            st_strlist_append(buf, size, layer_types[i].name, k++, n, ", ");
}
