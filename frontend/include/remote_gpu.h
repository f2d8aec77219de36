/*
 * What libremote.so offers a program beyond the CUDA API it stands in for.
 * Resolve the functions with dlsym(RTLD_DEFAULT, ...) where the program may
 * also run without libremote.so.
 */
#ifndef REMOTE_GPU_H
#define REMOTE_GPU_H

#ifdef __cplusplus
extern "C" {
#endif

/* Memory handed between tenants (docs/TENANTS.md): when the server asks this
 * client (a batch tenant's) to release the device memory its program caches,
 * libremote.so trims the devices' memory pools and then calls fn(arg), from a
 * thread of its own, once per request. fn gives back what the program's own
 * allocator caches (PyTorch: torch.cuda.empty_cache()). NULL removes the hook.
 * The server waits for the answer a bounded time (remote-gpud
 * --handover-wait-ms): fn should not block for long. */
void remote_gpu_set_release_hook(void (*fn)(void *arg), void *arg);

#ifdef __cplusplus
}
#endif

#endif
