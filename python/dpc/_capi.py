"""ctypes over runtime/dpc.h: the library a model is built into (dpc --emit=lib)."""
import ctypes

API_VERSION = 1  # dpc.h's DPC_API_VERSION this module speaks

OK, ERR_RUN, ERR_USAGE, ERR_STATE, ERR_INTERNAL = 0, 1, 2, 3, 70
HOST, DEVICE = 0, 1
VALUE, GRAD, ADAM_M, ADAM_V = 0, 1, 2, 3
INPUT, PARAM, BUFFER = 0, 1, 2


class Tensor(ctypes.Structure):
    _fields_ = [
        ("name", ctypes.c_char_p),
        ("file", ctypes.c_char_p),
        ("dtype", ctypes.c_char_p),
        ("rank", ctypes.c_int),
        ("dims", ctypes.c_int64 * 8),
        ("bytes", ctypes.c_int64),
        ("kind", ctypes.c_int),
        ("classes", ctypes.c_int),
    ]


def load(path):
    """The library at path, its calls typed; an OSError where it does not load."""
    lib = ctypes.CDLL(path)
    S = ctypes.c_void_p
    i64p = ctypes.POINTER(ctypes.c_int64)
    sig = {
        "dpc_version": (ctypes.c_int, []),
        "dpc_open": (ctypes.c_int, [ctypes.POINTER(S), ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)]),
        "dpc_error": (ctypes.c_char_p, [S]),
        "dpc_model": (ctypes.c_char_p, [S]),
        "dpc_inputs": (ctypes.c_int, [S]),
        "dpc_input": (ctypes.c_int, [S, ctypes.c_int, ctypes.POINTER(Tensor)]),
        "dpc_params": (ctypes.c_int, [S]),
        "dpc_param": (ctypes.c_int, [S, ctypes.c_int, ctypes.POINTER(Tensor)]),
        "dpc_reports": (ctypes.c_int, [S]),
        "dpc_optimizer": (ctypes.c_char_p, [S]),
        "dpc_steps_done": (ctypes.c_long, [S]),
        "dpc_put": (ctypes.c_int, [S, ctypes.c_char_p, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int, i64p, ctypes.c_int]),
        "dpc_step": (ctypes.c_int, [S, ctypes.POINTER(ctypes.c_double)]),
        "dpc_eval": (ctypes.c_int, [S, ctypes.POINTER(ctypes.c_double)]),
        "dpc_report": (ctypes.c_int, [S, ctypes.c_int, ctypes.POINTER(ctypes.c_char_p), ctypes.POINTER(ctypes.c_double)]),
        "dpc_get": (ctypes.c_int, [S, ctypes.c_char_p, ctypes.c_int, ctypes.c_void_p, ctypes.c_int64]),
        "dpc_set": (ctypes.c_int, [S, ctypes.c_char_p, ctypes.c_int, ctypes.c_void_p, ctypes.c_int64]),
        "dpc_save": (ctypes.c_int, [S, ctypes.c_char_p]),
        "dpc_save_state": (ctypes.c_int, [S, ctypes.c_char_p]),
        "dpc_resume": (ctypes.c_int, [S, ctypes.c_char_p]),
        "dpc_run": (ctypes.c_int, [S]),
        "dpc_close": (ctypes.c_int, [S]),
    }
    for name, (res, args) in sig.items():
        f = getattr(lib, name)
        f.restype, f.argtypes = res, args
    if lib.dpc_version() != API_VERSION:
        raise OSError("%s speaks dpc.h version %d; this package speaks %d: rebuild it with this dpc"
                      % (path, lib.dpc_version(), API_VERSION))
    return lib
