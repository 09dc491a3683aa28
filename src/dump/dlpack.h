/* The DLPack ABI (v0.x, as exported by torch.utils.dlpack.to_dlpack), declared
 * here so the shim needs no dlpack package. These layouts are a stable ABI:
 * frameworks exchange them across builds. */
#ifndef MSP_DLPACK_H
#define MSP_DLPACK_H

#include <stdint.h>

enum {
    MSP_DL_CPU = 1,
    MSP_DL_CUDA = 2,
    MSP_DL_CUDA_HOST = 3,
    MSP_DL_ROCM = 10
};

enum {
    MSP_DL_INT = 0,
    MSP_DL_UINT = 1,
    MSP_DL_FLOAT = 2,
    MSP_DL_OPAQUE_HANDLE = 3,
    MSP_DL_BFLOAT = 4,
    MSP_DL_COMPLEX = 5,
    MSP_DL_BOOL = 6
};

typedef struct msp_dl_device {
    int32_t device_type;
    int32_t device_id;
} msp_dl_device_t;

typedef struct msp_dl_dtype {
    uint8_t code;
    uint8_t bits;
    uint16_t lanes;
} msp_dl_dtype_t;

typedef struct msp_dl_tensor {
    void *data;
    msp_dl_device_t device;
    int32_t ndim;
    msp_dl_dtype_t dtype;
    int64_t *shape;
    int64_t *strides; /* in elements; NULL = C-contiguous */
    uint64_t byte_offset;
} msp_dl_tensor_t;

typedef struct msp_dl_managed {
    msp_dl_tensor_t dl_tensor;
    void *manager_ctx;
    void (*deleter)(struct msp_dl_managed *self);
} msp_dl_managed_t;

#endif
