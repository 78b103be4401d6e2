/* Elementwise activations (Darknet's definitions) and their derivatives
 * expressed through the output, so backward needs only dst. */
#include <math.h>

#include "ops/kdesc.h"

const char *const st_act_names[] = {"linear", "relu", "leaky", "logistic", "tanh", NULL};

void st_act_forward(st_act act, float *x, size_t count)
{
    switch (act) {
    case ST_ACT_LINEAR:
        break;
    case ST_ACT_RELU:
        for (size_t i = 0; i < count; i++)
            x[i] = x[i] > 0.0f ? x[i] : 0.0f;
        break;
    case ST_ACT_LEAKY:
        for (size_t i = 0; i < count; i++)
            x[i] = x[i] > 0.0f ? x[i] : 0.1f * x[i];
        break;
    case ST_ACT_LOGISTIC:
        for (size_t i = 0; i < count; i++)
            x[i] = 1.0f / (1.0f + expf(-x[i]));
        break;
    case ST_ACT_TANH:
        for (size_t i = 0; i < count; i++)
            x[i] = tanhf(x[i]);
        break;
    case ST_ACT_COUNT:
        break;
    }
}

void st_act_backward(st_act act, const float *y, const float *dy, float *dx, size_t count)
{
    switch (act) {
    case ST_ACT_LINEAR:
        if (dx != dy)
            for (size_t i = 0; i < count; i++)
                dx[i] = dy[i];
        break;
    case ST_ACT_RELU:
        for (size_t i = 0; i < count; i++)
            dx[i] = y[i] > 0.0f ? dy[i] : 0.0f;
        break;
    case ST_ACT_LEAKY:
        for (size_t i = 0; i < count; i++)
            dx[i] = y[i] > 0.0f ? dy[i] : 0.1f * dy[i];
        break;
    case ST_ACT_LOGISTIC:
        for (size_t i = 0; i < count; i++)
            dx[i] = dy[i] * y[i] * (1.0f - y[i]);
        break;
    case ST_ACT_TANH:
        for (size_t i = 0; i < count; i++)
            dx[i] = dy[i] * (1.0f - y[i] * y[i]);
        break;
    case ST_ACT_COUNT:
        break;
    }
}
