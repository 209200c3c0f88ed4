/*
 * A mock libnvidia-ml.so.1 for tests: the real nvidia-ml-py binding loads it through
 * LD_LIBRARY_PATH exactly as it loads the driver's library, and every ctypes struct, entry
 * point name and error code it uses is checked against the real nvml.h at compile time.
 *
 * The machine it pretends to be is a JSON profile named in MOCK_NVML_PROFILE (see
 * tests/mock_nvml/profiles/README.md for the format). A field missing from a GPU answers
 * NVML_ERROR_NOT_SUPPORTED, as NVML does on hardware without that feature; {"error": N}
 * answers error N. Entry points an old driver lacks are removed at link time (a version
 * script), so the binding's dlsym fails and it raises FunctionNotFound.
 */
#define NVML_NO_UNVERSIONED_FUNC_DEFS
#include <nvml.h>

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EXPORT __attribute__((visibility("default")))
#define MAX_GPUS 64
#define MAX_MIG 8

/* ---- a small JSON reader: enough for the profiles, nothing more ---- */

enum jtype { J_NULL, J_BOOL, J_NUM, J_STR, J_ARR, J_OBJ };

typedef struct jv {
    enum jtype t;
    double num;
    char *str;
    int n;
    char **keys;       /* J_OBJ */
    struct jv **items; /* J_ARR and J_OBJ values */
} jv;

static const char *jp;

static void skip_ws(void) {
    while (*jp && isspace((unsigned char)*jp)) jp++;
}

static jv *jnew(enum jtype t) {
    jv *v = calloc(1, sizeof(jv));
    v->t = t;
    return v;
}

static jv *jparse(void);

static char *jstring(void) {
    /* jp is at the opening quote; escapes other than \" \\ \/ \n \t are copied verbatim */
    size_t cap = 64, len = 0;
    char *out = malloc(cap);
    jp++;
    while (*jp && *jp != '"') {
        char c = *jp++;
        if (c == '\\' && *jp) {
            char e = *jp++;
            c = e == 'n' ? '\n' : e == 't' ? '\t' : e;
        }
        if (len + 2 > cap) out = realloc(out, cap *= 2);
        out[len++] = c;
    }
    if (*jp == '"') jp++;
    out[len] = 0;
    return out;
}

static void jpush(jv *v, char *key, jv *item) {
    v->items = realloc(v->items, sizeof(jv *) * (v->n + 1));
    if (v->t == J_OBJ) v->keys = realloc(v->keys, sizeof(char *) * (v->n + 1));
    if (key) v->keys[v->n] = key;
    v->items[v->n++] = item;
}

static jv *jparse(void) {
    skip_ws();
    if (*jp == '{') {
        jv *v = jnew(J_OBJ);
        jp++;
        for (skip_ws(); *jp && *jp != '}'; skip_ws()) {
            if (*jp == ',') { jp++; continue; }
            char *key = jstring();
            skip_ws();
            if (*jp == ':') jp++;
            jpush(v, key, jparse());
        }
        if (*jp) jp++;
        return v;
    }
    if (*jp == '[') {
        jv *v = jnew(J_ARR);
        jp++;
        for (skip_ws(); *jp && *jp != ']'; skip_ws()) {
            if (*jp == ',') { jp++; continue; }
            jpush(v, NULL, jparse());
        }
        if (*jp) jp++;
        return v;
    }
    if (*jp == '"') {
        jv *v = jnew(J_STR);
        v->str = jstring();
        return v;
    }
    if (!strncmp(jp, "true", 4)) { jp += 4; jv *v = jnew(J_BOOL); v->num = 1; return v; }
    if (!strncmp(jp, "false", 5)) { jp += 5; return jnew(J_BOOL); }
    if (!strncmp(jp, "null", 4)) { jp += 4; return jnew(J_NULL); }
    jv *v = jnew(J_NUM);
    char *end;
    v->num = strtod(jp, &end);
    jp = end > jp ? end : jp + 1;
    return v;
}

static jv *jget(const jv *obj, const char *key) {
    if (!obj || obj->t != J_OBJ) return NULL;
    for (int i = 0; i < obj->n; i++)
        if (!strcmp(obj->keys[i], key)) return obj->items[i];
    return NULL;
}

static jv *jat(const jv *arr, int i) {
    return arr && arr->t == J_ARR && i >= 0 && i < arr->n ? arr->items[i] : NULL;
}

/* ---- the machine ---- */

struct nvmlDevice_st {
    int gpu;  /* index into the profile's gpus */
    int mig;  /* -1: the physical GPU; else index into its "mig_devices" */
};

static jv *profile;
static int initialised;
static struct nvmlDevice_st handles[MAX_GPUS];
static struct nvmlDevice_st mig_handles[MAX_GPUS][MAX_MIG];
static int lost[MAX_GPUS];

static void load_profile(void) {
    if (profile) return;
    const char *path = getenv("MOCK_NVML_PROFILE");
    FILE *f = path ? fopen(path, "rb") : NULL;
    if (!f) {
        fprintf(stderr, "mock libnvidia-ml: cannot open MOCK_NVML_PROFILE=%s\n", path ? path : "(unset)");
        profile = jnew(J_OBJ);
        return;
    }
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *text = calloc(1, size + 1);
    if (fread(text, 1, size, f) != (size_t)size) size = 0;
    fclose(f);
    jp = text;
    profile = jparse();
    for (int i = 0; i < MAX_GPUS; i++) {
        handles[i].gpu = i;
        handles[i].mig = -1;
        for (int m = 0; m < MAX_MIG; m++) {
            mig_handles[i][m].gpu = i;
            mig_handles[i][m].mig = m;
        }
    }
}

static int gpu_count(void) {
    jv *gpus = jget(profile, "gpus");
    return gpus && gpus->t == J_ARR ? gpus->n : 0;
}

static jv *gpu_of(nvmlDevice_t d) {
    return d ? jat(jget(profile, "gpus"), d->gpu) : NULL;
}

/* The object a handle stands for: the GPU, or one of its MIG devices. */
static jv *object_of(nvmlDevice_t d) {
    jv *gpu = gpu_of(d);
    if (!gpu || d->mig < 0) return gpu;
    return jat(jget(gpu, "mig_devices"), d->mig);
}

/*
 * Look a field up for a call on a device. Returns NVML_SUCCESS and *out, or the error the
 * call answers: uninitialised, invalid handle, GPU lost, field missing (not supported), or
 * an {"error": N} the profile put there.
 */
static nvmlReturn_t field(nvmlDevice_t d, const char *call, const char *key, jv **out) {
    if (!initialised) return NVML_ERROR_UNINITIALIZED;
    jv *obj = object_of(d);
    if (!obj) return NVML_ERROR_INVALID_ARGUMENT;
    if (lost[d->gpu]) return NVML_ERROR_GPU_IS_LOST;
    jv *gpu = gpu_of(d);
    jv *lost_after = jget(gpu, "lost_after");
    if (lost_after && lost_after->t == J_STR && !strcmp(lost_after->str, call)) lost[d->gpu] = 1;
    jv *v = jget(obj, key);
    if (!v || v->t == J_NULL) return NVML_ERROR_NOT_SUPPORTED;
    jv *err = jget(v, "error");
    if (err) return (nvmlReturn_t)err->num;
    *out = v;
    return NVML_SUCCESS;
}

static nvmlReturn_t copy_str(const char *s, char *buf, unsigned int length) {
    if (!buf) return NVML_ERROR_INVALID_ARGUMENT;
    if (strlen(s) + 1 > length) return NVML_ERROR_INSUFFICIENT_SIZE;
    strcpy(buf, s);
    return NVML_SUCCESS;
}

/* ---- system ---- */

EXPORT nvmlReturn_t nvmlInitWithFlags(unsigned int flags) {
    (void)flags;
    load_profile();
    jv *err = jget(profile, "init_error");
    if (err && err->t == J_NUM) return (nvmlReturn_t)err->num;
    initialised++;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlInit_v2(void) { return nvmlInitWithFlags(0); }
EXPORT nvmlReturn_t nvmlInit(void) { return nvmlInitWithFlags(0); }

EXPORT nvmlReturn_t nvmlShutdown(void) {
    if (!initialised) return NVML_ERROR_UNINITIALIZED;
    initialised--;
    return NVML_SUCCESS;
}

EXPORT const char *nvmlErrorString(nvmlReturn_t result) {
    switch (result) {
    case NVML_SUCCESS: return "Success";
    case NVML_ERROR_UNINITIALIZED: return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT: return "Invalid Argument";
    case NVML_ERROR_NOT_SUPPORTED: return "Not Supported";
    case NVML_ERROR_NO_PERMISSION: return "Insufficient Permissions";
    case NVML_ERROR_NOT_FOUND: return "Not Found";
    case NVML_ERROR_INSUFFICIENT_SIZE: return "Insufficient Size";
    case NVML_ERROR_DRIVER_NOT_LOADED: return "Driver Not Loaded";
    case NVML_ERROR_TIMEOUT: return "Timeout";
    case NVML_ERROR_GPU_IS_LOST: return "GPU is lost";
    case NVML_ERROR_LIB_RM_VERSION_MISMATCH: return "RM has detected an NVML/RM version mismatch.";
    default: return "Unknown Error";
    }
}

static nvmlReturn_t system_str(const char *key, char *buf, unsigned int length) {
    if (!initialised) return NVML_ERROR_UNINITIALIZED;
    jv *v = jget(profile, key);
    if (!v || v->t != J_STR) return NVML_ERROR_NOT_SUPPORTED;
    return copy_str(v->str, buf, length);
}

EXPORT nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length) {
    return system_str("driver_version", version, length);
}

EXPORT nvmlReturn_t nvmlSystemGetNVMLVersion(char *version, unsigned int length) {
    return system_str("nvml_version", version, length);
}

EXPORT nvmlReturn_t nvmlSystemGetCudaDriverVersion(int *cudaDriverVersion) {
    if (!initialised) return NVML_ERROR_UNINITIALIZED;
    jv *v = jget(profile, "cuda_driver_version");
    if (!v || v->t != J_NUM) return NVML_ERROR_NOT_SUPPORTED;
    *cudaDriverVersion = (int)v->num;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int *cudaDriverVersion) {
    return nvmlSystemGetCudaDriverVersion(cudaDriverVersion);
}

/* ---- enumeration ---- */

EXPORT nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *deviceCount) {
    if (!initialised) return NVML_ERROR_UNINITIALIZED;
    *deviceCount = (unsigned int)gpu_count();
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetCount(unsigned int *deviceCount) { return nvmlDeviceGetCount_v2(deviceCount); }

EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device) {
    if (!initialised) return NVML_ERROR_UNINITIALIZED;
    if ((int)index >= gpu_count() || index >= MAX_GPUS) return NVML_ERROR_INVALID_ARGUMENT;
    if (lost[index]) return NVML_ERROR_GPU_IS_LOST;
    *device = &handles[index];
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int index, nvmlDevice_t *device) {
    return nvmlDeviceGetHandleByIndex_v2(index, device);
}

/* ---- identity ---- */

static nvmlReturn_t str_field(nvmlDevice_t d, const char *call, const char *key, char *buf, unsigned int length) {
    jv *v = NULL;
    nvmlReturn_t r = field(d, call, key, &v);
    if (r != NVML_SUCCESS) return r;
    return copy_str(v->t == J_STR ? v->str : "", buf, length);
}

EXPORT nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char *name, unsigned int length) {
    return str_field(device, "nvmlDeviceGetName", "name", name, length);
}

EXPORT nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char *uuid, unsigned int length) {
    return str_field(device, "nvmlDeviceGetUUID", "uuid", uuid, length);
}

static nvmlReturn_t fill_pci(const char *bus_id, nvmlPciInfo_t *pci) {
    unsigned int domain = 0, bus = 0, dev = 0, fn = 0;
    memset(pci, 0, sizeof(*pci));
    sscanf(bus_id, "%x:%x:%x.%x", &domain, &bus, &dev, &fn);
    snprintf(pci->busId, sizeof(pci->busId), "%s", bus_id);
    snprintf(pci->busIdLegacy, sizeof(pci->busIdLegacy), "%04X:%02X:%02X.%X", domain & 0xffff, bus, dev, fn);
    pci->domain = domain;
    pci->bus = bus;
    pci->device = dev;
    pci->pciDeviceId = 0x10de;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, nvmlPciInfo_t *pci) {
    jv *v = NULL;
    nvmlReturn_t r = field(device, "nvmlDeviceGetPciInfo", "bus_id", &v);
    if (r != NVML_SUCCESS) return r;
    return fill_pci(v->str, pci);
}

EXPORT nvmlReturn_t nvmlDeviceGetPciInfo_v2(nvmlDevice_t device, nvmlPciInfo_t *pci) {
    return nvmlDeviceGetPciInfo_v3(device, pci);
}

EXPORT nvmlReturn_t nvmlDeviceGetPciInfo(nvmlDevice_t device, nvmlPciInfo_t *pci) {
    return nvmlDeviceGetPciInfo_v3(device, pci);
}

/* ---- memory ---- */

static nvmlReturn_t memory(nvmlDevice_t device, unsigned long long *total, unsigned long long *used) {
    jv *v = NULL;
    nvmlReturn_t r = field(device, "nvmlDeviceGetMemoryInfo", "memory", &v);
    if (r != NVML_SUCCESS) return r;
    *total = (unsigned long long)jat(v, 0)->num;
    *used = (unsigned long long)jat(v, 1)->num;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *mem) {
    unsigned long long total, used;
    nvmlReturn_t r = memory(device, &total, &used);
    if (r != NVML_SUCCESS) return r;
    mem->total = total;
    mem->used = used;
    mem->free = total - used;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t *mem) {
    unsigned long long total, used;
    nvmlReturn_t r = memory(device, &total, &used);
    if (r != NVML_SUCCESS) return r;
    mem->total = total;
    mem->reserved = 0;
    mem->used = used;
    mem->free = total - used;
    return NVML_SUCCESS;
}

/* ---- simple per-GPU values ---- */

static nvmlReturn_t uint_field(nvmlDevice_t d, const char *call, const char *key, int pos, unsigned long long *out) {
    jv *v = NULL;
    nvmlReturn_t r = field(d, call, key, &v);
    if (r != NVML_SUCCESS) return r;
    jv *item = v->t == J_ARR ? jat(v, pos) : v;
    if (!item) return NVML_ERROR_NOT_SUPPORTED;
    *out = (unsigned long long)item->num;
    return NVML_SUCCESS;
}

#define UINT_GETTER(fn, key, pos, type)                                           \
    EXPORT nvmlReturn_t fn(nvmlDevice_t device, type *value) {                   \
        unsigned long long v;                                                     \
        nvmlReturn_t r = uint_field(device, #fn, key, pos, &v);                   \
        if (r == NVML_SUCCESS) *value = (type)v;                                  \
        return r;                                                                 \
    }

UINT_GETTER(nvmlDeviceGetPersistenceMode, "persistence_mode", 0, nvmlEnableState_t)
UINT_GETTER(nvmlDeviceGetComputeMode, "compute_mode", 0, nvmlComputeMode_t)
UINT_GETTER(nvmlDeviceGetCurrPcieLinkGeneration, "pcie_gen", 0, unsigned int)
UINT_GETTER(nvmlDeviceGetMaxPcieLinkGeneration, "pcie_gen", 1, unsigned int)
UINT_GETTER(nvmlDeviceGetCurrPcieLinkWidth, "pcie_width", 0, unsigned int)
UINT_GETTER(nvmlDeviceGetMaxPcieLinkWidth, "pcie_width", 1, unsigned int)
UINT_GETTER(nvmlDeviceGetCurrentClocksThrottleReasons, "clocks_event_reasons", 0, unsigned long long)
UINT_GETTER(nvmlDeviceGetCurrentClocksEventReasons, "clocks_event_reasons", 0, unsigned long long)
UINT_GETTER(nvmlDeviceGetMaxMigDeviceCount, "max_mig_devices", 0, unsigned int)

EXPORT nvmlReturn_t nvmlDeviceGetCudaComputeCapability(nvmlDevice_t device, int *major, int *minor) {
    unsigned long long a, b;
    nvmlReturn_t r = uint_field(device, "nvmlDeviceGetCudaComputeCapability", "compute_capability", 0, &a);
    if (r == NVML_SUCCESS) r = uint_field(device, "nvmlDeviceGetCudaComputeCapability", "compute_capability", 1, &b);
    if (r == NVML_SUCCESS) { *major = (int)a; *minor = (int)b; }
    return r;
}

static nvmlReturn_t pair(nvmlDevice_t device, const char *call, const char *key, unsigned int *cur, unsigned int *pend) {
    unsigned long long a, b;
    nvmlReturn_t r = uint_field(device, call, key, 0, &a);
    if (r == NVML_SUCCESS) r = uint_field(device, call, key, 1, &b);
    if (r == NVML_SUCCESS) { *cur = (unsigned int)a; *pend = (unsigned int)b; }
    return r;
}

EXPORT nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t device, unsigned int *currentMode, unsigned int *pendingMode) {
    return pair(device, "nvmlDeviceGetMigMode", "mig_mode", currentMode, pendingMode);
}

EXPORT nvmlReturn_t nvmlDeviceGetEccMode(nvmlDevice_t device, nvmlEnableState_t *current, nvmlEnableState_t *pending) {
    return pair(device, "nvmlDeviceGetEccMode", "ecc_mode", (unsigned int *)current, (unsigned int *)pending);
}

EXPORT nvmlReturn_t nvmlDeviceGetTotalEccErrors(nvmlDevice_t device, nvmlMemoryErrorType_t errorType,
                                                nvmlEccCounterType_t counterType, unsigned long long *eccCounts) {
    /* "ecc_errors": [[corrected volatile, corrected aggregate], [uncorrected volatile, uncorrected aggregate]] */
    jv *v = NULL;
    nvmlReturn_t r = field(device, "nvmlDeviceGetTotalEccErrors", "ecc_errors", &v);
    if (r != NVML_SUCCESS) return r;
    jv *n = jat(jat(v, errorType == NVML_MEMORY_ERROR_TYPE_UNCORRECTED), counterType == NVML_AGGREGATE_ECC);
    if (!n) return NVML_ERROR_INVALID_ARGUMENT;
    *eccCounts = (unsigned long long)n->num;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t device, nvmlTemperatureSensors_t sensorType,
                                             unsigned int *temp) {
    if (sensorType != NVML_TEMPERATURE_GPU) return NVML_ERROR_INVALID_ARGUMENT;
    unsigned long long v;
    nvmlReturn_t r = uint_field(device, "nvmlDeviceGetTemperature", "temperature_c", 0, &v);
    if (r == NVML_SUCCESS) *temp = (unsigned int)v;
    return r;
}

/* ---- processes: [[pid, used bytes or null], ...] under "compute_processes" / "graphics_processes" ---- */

static nvmlReturn_t processes(nvmlDevice_t device, const char *call, const char *key, unsigned int *count,
                              unsigned int *pids, unsigned long long *used, int *n_out) {
    jv *v = NULL;
    nvmlReturn_t r = field(device, call, key, &v);
    if (r == NVML_ERROR_NOT_SUPPORTED) { *count = 0; return NVML_SUCCESS; } /* none running */
    if (r != NVML_SUCCESS) return r;
    int n = v->t == J_ARR ? v->n : 0;
    *n_out = n;
    if (n == 0) { *count = 0; return NVML_SUCCESS; }
    if (!pids || *count < (unsigned int)n) { *count = (unsigned int)n; return NVML_ERROR_INSUFFICIENT_SIZE; }
    for (int i = 0; i < n; i++) {
        jv *row = jat(v, i);
        pids[i] = (unsigned int)jat(row, 0)->num;
        jv *mem = jat(row, 1);
        used[i] = mem && mem->t == J_NUM ? (unsigned long long)mem->num : (unsigned long long)NVML_VALUE_NOT_AVAILABLE;
    }
    *count = (unsigned int)n;
    return NVML_SUCCESS;
}

#define PROCESS_GETTER(fn, key, type, v2)                                                        \
    EXPORT nvmlReturn_t fn(nvmlDevice_t device, unsigned int *infoCount, type *infos) {         \
        unsigned int pids[256];                                                                  \
        unsigned long long used[256];                                                            \
        int n = 0;                                                                               \
        unsigned int cap = infos ? *infoCount : 0;                                               \
        unsigned int count = cap > 256 ? 256 : cap;                                              \
        nvmlReturn_t r = processes(device, #fn, key, &count, infos ? pids : NULL, used, &n);     \
        *infoCount = count;                                                                      \
        if (r != NVML_SUCCESS || !infos) return r;                                               \
        for (int i = 0; i < n; i++) {                                                            \
            memset(&infos[i], 0, sizeof(type));                                                  \
            infos[i].pid = pids[i];                                                              \
            infos[i].usedGpuMemory = used[i];                                                    \
            if (v2) { ((nvmlProcessInfo_v2_t *)&infos[i])->gpuInstanceId = 0xFFFFFFFF;           \
                      ((nvmlProcessInfo_v2_t *)&infos[i])->computeInstanceId = 0xFFFFFFFF; }     \
        }                                                                                        \
        return r;                                                                                \
    }

PROCESS_GETTER(nvmlDeviceGetComputeRunningProcesses, "compute_processes", nvmlProcessInfo_v1_t, 0)
PROCESS_GETTER(nvmlDeviceGetComputeRunningProcesses_v2, "compute_processes", nvmlProcessInfo_v2_t, 1)
PROCESS_GETTER(nvmlDeviceGetComputeRunningProcesses_v3, "compute_processes", nvmlProcessInfo_t, 1)
PROCESS_GETTER(nvmlDeviceGetGraphicsRunningProcesses, "graphics_processes", nvmlProcessInfo_v1_t, 0)
PROCESS_GETTER(nvmlDeviceGetGraphicsRunningProcesses_v2, "graphics_processes", nvmlProcessInfo_v2_t, 1)
PROCESS_GETTER(nvmlDeviceGetGraphicsRunningProcesses_v3, "graphics_processes", nvmlProcessInfo_t, 1)

/* ---- NVLink: "nvlinks": [{"remote": bus id, "type": "gpu"|"switch"}, ...] one per active link ---- */

static nvmlReturn_t nvlink(nvmlDevice_t device, const char *call, unsigned int link, jv **out) {
    jv *v = NULL;
    nvmlReturn_t r = field(device, call, "nvlinks", &v);
    if (r != NVML_SUCCESS) return r;
    if (link >= NVML_NVLINK_MAX_LINKS) return NVML_ERROR_INVALID_ARGUMENT;
    *out = jat(v, (int)link); /* NULL: a link this GPU has but that is not active */
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetNvLinkState(nvmlDevice_t device, unsigned int link, nvmlEnableState_t *isActive) {
    jv *l = NULL;
    nvmlReturn_t r = nvlink(device, "nvmlDeviceGetNvLinkState", link, &l);
    if (r == NVML_SUCCESS) *isActive = l ? NVML_FEATURE_ENABLED : NVML_FEATURE_DISABLED;
    return r;
}

EXPORT nvmlReturn_t nvmlDeviceGetNvLinkRemotePciInfo_v2(nvmlDevice_t device, unsigned int link, nvmlPciInfo_t *pci) {
    jv *l = NULL;
    nvmlReturn_t r = nvlink(device, "nvmlDeviceGetNvLinkRemotePciInfo", link, &l);
    if (r != NVML_SUCCESS) return r;
    if (!l) return NVML_ERROR_NOT_SUPPORTED;
    return fill_pci(jget(l, "remote")->str, pci);
}

EXPORT nvmlReturn_t nvmlDeviceGetNvLinkRemotePciInfo(nvmlDevice_t device, unsigned int link, nvmlPciInfo_t *pci) {
    return nvmlDeviceGetNvLinkRemotePciInfo_v2(device, link, pci);
}

EXPORT nvmlReturn_t nvmlDeviceGetNvLinkRemoteDeviceType(nvmlDevice_t device, unsigned int link,
                                                        nvmlIntNvLinkDeviceType_t *pNvLinkDeviceType) {
    jv *l = NULL;
    nvmlReturn_t r = nvlink(device, "nvmlDeviceGetNvLinkRemoteDeviceType", link, &l);
    if (r != NVML_SUCCESS) return r;
    if (!l) return NVML_ERROR_NOT_SUPPORTED;
    jv *t = jget(l, "type");
    *pNvLinkDeviceType = t && !strcmp(t->str, "switch") ? NVML_NVLINK_DEVICE_TYPE_SWITCH : NVML_NVLINK_DEVICE_TYPE_GPU;
    return NVML_SUCCESS;
}

/* ---- pairs: "topology" and "p2p_read" are NxN matrices of NVML's enum values ---- */

static nvmlReturn_t pair_value(nvmlDevice_t a, nvmlDevice_t b, const char *key, unsigned int *out) {
    if (!initialised) return NVML_ERROR_UNINITIALIZED;
    if (!gpu_of(a) || !gpu_of(b) || a->mig >= 0 || b->mig >= 0) return NVML_ERROR_INVALID_ARGUMENT;
    if (lost[a->gpu] || lost[b->gpu]) return NVML_ERROR_GPU_IS_LOST;
    jv *n = jat(jat(jget(profile, key), a->gpu), b->gpu);
    if (!n) return NVML_ERROR_NOT_SUPPORTED;
    jv *err = jget(n, "error");
    if (err) return (nvmlReturn_t)err->num;
    *out = (unsigned int)n->num;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetTopologyCommonAncestor(nvmlDevice_t device1, nvmlDevice_t device2,
                                                        nvmlGpuTopologyLevel_t *pathInfo) {
    unsigned int v;
    nvmlReturn_t r = pair_value(device1, device2, "topology", &v);
    if (r == NVML_SUCCESS) *pathInfo = (nvmlGpuTopologyLevel_t)v;
    return r;
}

EXPORT nvmlReturn_t nvmlDeviceGetP2PStatus(nvmlDevice_t device1, nvmlDevice_t device2, nvmlGpuP2PCapsIndex_t p2pIndex,
                                           nvmlGpuP2PStatus_t *p2pStatus) {
    unsigned int v;
    if (p2pIndex != NVML_P2P_CAPS_INDEX_READ) return NVML_ERROR_NOT_SUPPORTED;
    nvmlReturn_t r = pair_value(device1, device2, "p2p_read", &v);
    if (r == NVML_SUCCESS) *p2pStatus = (nvmlGpuP2PStatus_t)v;
    return r;
}

/* ---- MIG: "mig_devices": [{"uuid": "MIG-...", "memory": [total, used]}, ...] ---- */

EXPORT nvmlReturn_t nvmlDeviceGetMigDeviceHandleByIndex(nvmlDevice_t device, unsigned int index,
                                                        nvmlDevice_t *migDevice) {
    jv *v = NULL;
    nvmlReturn_t r = field(device, "nvmlDeviceGetMigDeviceHandleByIndex", "mig_devices", &v);
    if (r != NVML_SUCCESS) return r;
    if (device->mig >= 0) return NVML_ERROR_INVALID_ARGUMENT;
    if ((int)index >= v->n || index >= MAX_MIG) return NVML_ERROR_NOT_FOUND;
    *migDevice = &mig_handles[device->gpu][index];
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceIsMigDeviceHandle(nvmlDevice_t device, unsigned int *isMigDevice) {
    if (!initialised) return NVML_ERROR_UNINITIALIZED;
    if (!object_of(device)) return NVML_ERROR_INVALID_ARGUMENT;
    *isMigDevice = device->mig >= 0;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetDeviceHandleFromMigDeviceHandle(nvmlDevice_t migDevice, nvmlDevice_t *device) {
    if (!initialised) return NVML_ERROR_UNINITIALIZED;
    if (!object_of(migDevice) || migDevice->mig < 0) return NVML_ERROR_INVALID_ARGUMENT;
    *device = &handles[migDevice->gpu];
    return NVML_SUCCESS;
}
