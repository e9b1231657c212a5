"""PyTorch models on the chip: a torch.nn.Sequential in, a tessera.keras.Sequential out, and back.

    net = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                        nn.Linear(8 * 14 * 14, 10))
    model = tessera.torch.from_module(net, input_shape=(1, 28, 28),
                                      optimizer=torch.optim.Adam(net.parameters(), 1e-3),
                                      loss=nn.CrossEntropyLoss())
    model.fit(x_nhwc, y, batch_size=64)          # on the chip (Keras's NHWC images)
    trained = tessera.torch.to_module(model)     # a fresh nn.Sequential with the chip's weights

What converts (anything else is a ValueError naming the module's index, its class and the
argument, and nothing is built):

    nn.Conv2d      bias, dilation 1, groups 1, square kernel and stride, zero padding: 0
                   ('valid'), or at stride 1 padding='same' or k // 2 for an odd k (PyTorch's
                   symmetric padding is then TensorFlow's 'same', which the chip computes;
                   docs/compiler.md). Weight [out, in, kh, kw] -> Keras kernel [kh, kw, in, out].
    nn.MaxPool2d,  kernel = stride, no padding, dilation 1, floor mode.
    nn.AvgPool2d
    nn.Flatten     start_dim 1. The chip's feature maps are NHWC, so its flatten order is
                   (h, w, c) where PyTorch's is (c, h, w): the first Linear after it has its
                   input rows permuted accordingly (and back in to_module).
    nn.Linear      bias. Weight [out, in] -> Keras kernel [in, out].
    nn.ReLU        folded into the Conv2d or Linear just before it (activation='relu').
    nn.Dropout     Dropout(rate=p) (the chip lowers it after a hidden relu Linear only).
    nn.Softmax     dim=1, as the last module only.

The last Linear becomes Dense(activation='softmax') whether a final nn.Softmax follows it or not:
the chip trains a classifier with the softmax and the cross-entropy fused, i.e. PyTorch's
nn.CrossEntropyLoss on the last Linear's logits (the `loss` accepted here), and predict() returns
the probabilities. to_module gives back the module's own form: with the final nn.Softmax if the
imported module had one (a model built in tessera.keras gets it, so that its forward is
predict()), else ending on the logits.

Numerics: the chip keeps the weights fp32 (imported and exported exactly) and computes with bf16
MXU operands (inputs, weights, stored activations), fp32 sums in its fixed order and its VPU
softmax (docs/numerics.md, docs/compiler.md "Numerics: where the step rounds"). PyTorch's fp32
forward of the exported module therefore agrees with predict() to bf16 rounding of the operands,
not bit for bit; with the operands and every layer's output rounded to bf16 it agrees to the
fp32 sums (tests/python/test_torch.py measures both).

The optimizer: torch.optim.Adam and SGD (one parameter group, no weight decay, amsgrad, nesterov
or dampening) become the chip's Adam and SGD with their learning rate, betas, eps and momentum,
as do Keras's names and instances. The chip's Adam is Keras's form (eps added to sqrt(v), not to
sqrt(v_hat)): with eps = 1e-8 the two differ by eps * sqrt(1 - beta_2^t) in the denominator.
The model is built in the tessera.distribute strategy whose scope is entered (one functional chip
outside any scope), as any tessera.keras model.
"""
import re

import numpy as np
import torch
from torch import nn

from tessera import keras

_SUPPORTED = "Conv2d, MaxPool2d, AvgPool2d, Flatten, Linear, ReLU, Dropout and a final Softmax"


class _Refusal(ValueError):
    pass


def _where(i, name, module):
    label = f"module {i}" if name == str(i) else f"module {i} '{name}'"
    return f"{label} ({type(module).__name__})"


def _square(value, what, at):
    v = tuple(value) if isinstance(value, (tuple, list)) else (value, value)
    if len(v) != 2 or v[0] != v[1]:
        raise _Refusal(f"{at}: {what}={value!r}: only square {what} is supported on the chip")
    return int(v[0])


def _as_numpy(t):
    return t.detach().cpu().to(torch.float32).numpy().copy()


def _flatten_perm(c, h, w):
    """perm[j] = the PyTorch (c, h, w) flatten index of the chip's (h, w, c) flatten index j."""
    return np.arange(c * h * w).reshape(c, h, w).transpose(1, 2, 0).ravel()


# ---- the plan: one entry per PyTorch module, what both directions build from -----------------

def _plan_from_module(module, input_shape):
    """The modules of `module` as plan entries (dicts), checked; _Refusal on the first problem."""
    if not isinstance(module, nn.Sequential):
        raise _Refusal(f"from_module: a torch.nn.Sequential, not {type(module).__name__}")
    shape = tuple(int(s) for s in input_shape)
    if len(shape) == 3:
        c, h, w = shape
        spatial = True
    elif len(shape) == 1:
        c, h, w = shape[0], 1, 1
        spatial = False
    else:
        raise _Refusal(f"from_module: input_shape={input_shape!r}: (C, H, W) or (features,)")
    if min(shape) < 1:
        raise _Refusal(f"from_module: input_shape={input_shape!r}: positive sizes")
    children = list(module.named_children())
    if not children:
        raise _Refusal("from_module: the nn.Sequential is empty")
    plan = []
    flat_from = None        # (C, H, W) at the Flatten, for the next Linear's rows
    features = None         # after Flatten: the vector length
    linears = [i for i, (_, m) in enumerate(children) if type(m) is nn.Linear]
    for i, (name, m) in enumerate(children):
        at = _where(i, name, m)
        kind = type(m)
        prev = plan[-1]["kind"] if plan else None

        def arg(key, value, expected, why=""):
            if value != expected:
                raise _Refusal(f"{at}: {key}={value!r} is not supported on the chip (only "
                               f"{expected!r}{'; ' + why if why else ''})")

        if kind is nn.Conv2d:
            if features is not None or not spatial:
                raise _Refusal(f"{at}: a convolution needs a (C, H, W) input before Flatten")
            k = _square(m.kernel_size, "kernel_size", at)
            s = _square(m.stride, "stride", at)
            arg("dilation", tuple(m.dilation), (1, 1))
            arg("groups", m.groups, 1)
            if m.bias is None:
                raise _Refusal(f"{at}: bias=False is not supported on the chip (only bias=True)")
            arg("padding_mode", m.padding_mode, "zeros")
            if m.in_channels != c:
                raise _Refusal(f"{at}: in_channels={m.in_channels}, but its input has {c} "
                               "channels")
            if isinstance(m.padding, str):
                pad_form = m.padding
                padding = m.padding  # 'valid' or 'same' (PyTorch allows 'same' at stride 1 only)
            else:
                p = _square(m.padding, "padding", at) if m.padding != (0, 0) else 0
                pad_form = p
                if p == 0:
                    padding = "valid"
                elif s == 1 and k % 2 == 1 and p == k // 2:
                    padding = "same"
                else:
                    raise _Refusal(
                        f"{at}: padding={m.padding!r} is not supported on the chip (only 0, or "
                        f"k // 2 = {k // 2} at stride 1 with an odd kernel: TensorFlow's 'same')")
            if padding == "valid":
                h, w = (h - k) // s + 1, (w - k) // s + 1
            else:
                h, w = -(-h // s), -(-w // s)
            if h < 1 or w < 1:
                raise _Refusal(f"{at}: the kernel is larger than its {c}-channel input")
            c = m.out_channels
            plan.append({"kind": "conv", "name": name, "in": m.in_channels, "out": c, "k": k,
                         "s": s, "padding": padding, "pad_form": pad_form, "relu": False,
                         "module": m})
        elif kind in (nn.MaxPool2d, nn.AvgPool2d):
            if features is not None or not spatial:
                raise _Refusal(f"{at}: pooling needs a (C, H, W) input before Flatten")
            k = _square(m.kernel_size, "kernel_size", at)
            s = _square(m.stride if m.stride is not None else m.kernel_size, "stride", at)
            arg("stride", s, k, "stride = kernel_size")
            arg("padding", m.padding if m.padding != (0, 0) else 0, 0)
            arg("ceil_mode", m.ceil_mode, False)
            if kind is nn.MaxPool2d:
                arg("dilation", m.dilation if m.dilation != (1, 1) else 1, 1)
                arg("return_indices", m.return_indices, False)
            else:
                arg("divisor_override", m.divisor_override, None)
            h, w = h // k, w // k
            if h < 1 or w < 1:
                raise _Refusal(f"{at}: the pool is larger than its input")
            plan.append({"kind": "maxpool" if kind is nn.MaxPool2d else "avgpool", "name": name,
                         "k": k})
        elif kind is nn.Flatten:
            if features is not None:
                raise _Refusal(f"{at}: a second Flatten")
            arg("start_dim", m.start_dim, 1)
            arg("end_dim", m.end_dim, -1)
            flat_from = (c, h, w) if spatial else None
            features = c * h * w
            plan.append({"kind": "flatten", "name": name})
        elif kind is nn.Linear:
            if features is None:
                if spatial:
                    raise _Refusal(f"{at}: a Linear on a (C, H, W) input needs an nn.Flatten "
                                   "before it")
                features = c
            if m.bias is None:
                raise _Refusal(f"{at}: bias=False is not supported on the chip (only bias=True)")
            if m.in_features != features:
                raise _Refusal(f"{at}: in_features={m.in_features}, but its input has "
                               f"{features} values")
            perm = flat_from if prev == "flatten" else None
            plan.append({"kind": "linear", "name": name, "in": m.in_features,
                         "out": m.out_features, "perm": perm, "relu": False,
                         "last": i == linears[-1], "module": m})
            features = m.out_features
        elif kind is nn.ReLU:
            if prev not in ("conv", "linear") or plan[-1]["relu"]:
                raise _Refusal(f"{at}: a ReLU is folded into the Conv2d or Linear just before "
                               "it; here it follows " + (f"a {prev}" if prev else "nothing"))
            if plan[-1]["kind"] == "linear" and plan[-1]["last"]:
                raise _Refusal(f"{at}: a ReLU after the last Linear: the chip's last layer is "
                               "the softmax classifier (its logits go to the cross-entropy)")
            plan[-1]["relu"] = True
            plan.append({"kind": "relu", "name": name})
        elif kind is nn.Dropout:
            if not 0 <= m.p < 1:
                raise _Refusal(f"{at}: p={m.p!r}: in [0, 1)")
            plan.append({"kind": "dropout", "name": name, "p": float(m.p)})
        elif kind is nn.Softmax:
            if i != len(children) - 1:
                raise _Refusal(f"{at}: a Softmax only as the last module")
            if m.dim not in (1, -1):
                raise _Refusal(f"{at}: dim={m.dim!r} is not supported on the chip (only 1: "
                               "the classes of each sample)")
            if prev != "linear":
                raise _Refusal(f"{at}: the Softmax must follow the last Linear directly")
            plan.append({"kind": "softmax", "name": name})
        else:
            raise _Refusal(f"{at}: not supported on the chip (supported: {_SUPPORTED})")
    if not linears:
        raise _Refusal("from_module: no nn.Linear: the chip's model ends on a Linear classifier")
    return plan


def _keras_layers(plan):
    """The tessera.keras layers of a plan, and for each the plan entry it came from."""
    L = keras.layers
    out, origin = [], []
    for e in plan:
        act = "relu" if e.get("relu") else None
        if e["kind"] == "conv":
            out.append(L.Conv2D(e["out"], e["k"], strides=e["s"], padding=e["padding"],
                                activation=act))
        elif e["kind"] == "maxpool":
            out.append(L.MaxPooling2D(e["k"]))
        elif e["kind"] == "avgpool":
            out.append(L.AveragePooling2D(e["k"]))
        elif e["kind"] == "flatten":
            out.append(L.Flatten())
        elif e["kind"] == "linear":
            out.append(L.Dense(e["out"], activation="softmax" if e["last"] else act))
        elif e["kind"] == "dropout":
            out.append(L.Dropout(e["p"]))
        else:
            continue  # relu (folded), softmax (the last Dense's)
        origin.append(e)
    return out, origin


def _to_keras_weights(plan):
    weights = []
    for e in plan:
        m = e.get("module")
        if e["kind"] == "conv":
            weights.append(np.ascontiguousarray(_as_numpy(m.weight).transpose(2, 3, 1, 0)))
            weights.append(_as_numpy(m.bias))
        elif e["kind"] == "linear":
            k = _as_numpy(m.weight).T  # [in][out], rows in PyTorch's flatten order
            if e["perm"] is not None:
                k = k[_flatten_perm(*e["perm"])]
            weights.append(np.ascontiguousarray(k))
            weights.append(_as_numpy(m.bias))
    return weights


# ---- the optimizer and the loss ---------------------------------------------------------------

def _optimizer(opt):
    if opt is None:
        return keras.optimizers.Adam()
    if not isinstance(opt, torch.optim.Optimizer):
        return keras.optimizers.get(opt)
    if len({tuple(sorted((k, repr(v)) for k, v in g.items() if k != "params"))
            for g in opt.param_groups}) != 1:
        raise ValueError(f"optimizer {type(opt).__name__}: the parameter groups differ: the chip "
                         "applies one setting to every weight")
    g = opt.param_groups[0]

    def check(key, expected):
        if key in g and g[key] != expected:
            raise ValueError(f"optimizer {type(opt).__name__}: {key}={g[key]!r} is not supported "
                             f"on the chip (only {expected!r})")

    check("weight_decay", 0)
    check("maximize", False)
    if type(opt) is torch.optim.Adam:
        check("amsgrad", False)
        b1, b2 = g["betas"]
        return keras.optimizers.Adam(learning_rate=float(g["lr"]), beta_1=float(b1),
                                     beta_2=float(b2), epsilon=float(g["eps"]))
    if type(opt) is torch.optim.SGD:
        check("nesterov", False)
        check("dampening", 0)
        return keras.optimizers.SGD(learning_rate=float(g["lr"]), momentum=float(g["momentum"]))
    raise ValueError(f"optimizer {type(opt).__name__}: the chip's update step implements "
                     "torch.optim.Adam and torch.optim.SGD")


def _loss(loss):
    if loss is None:
        return "sparse_categorical_crossentropy"
    if isinstance(loss, nn.CrossEntropyLoss):
        if loss.weight is not None:
            raise ValueError("loss CrossEntropyLoss: weight is not supported on the chip")
        if loss.reduction != "mean":
            raise ValueError(f"loss CrossEntropyLoss: reduction={loss.reduction!r} is not "
                             "supported on the chip (only 'mean')")
        return keras.losses.SparseCategoricalCrossentropy(
            label_smoothing=float(getattr(loss, "label_smoothing", 0.0)))
    if isinstance(loss, nn.Module):
        raise ValueError(f"loss {type(loss).__name__}: the chip trains with the softmax cross-"
                         "entropy: nn.CrossEntropyLoss on the last Linear's logits")
    return loss


# ---- the two directions -----------------------------------------------------------------------

def from_module(module, input_shape, optimizer=None, loss=None, metrics=("accuracy",), name=None):
    """A compiled tessera.keras.Sequential computing `module` with its weights.

    input_shape: (C, H, W) as PyTorch sees one image (the chip takes the images NHWC: pass
    x.transpose(0, 2, 3, 1) of PyTorch's batches to fit/evaluate/predict), or (features,).
    optimizer: a torch.optim.Adam/SGD, a Keras name or instance (default Adam()). loss:
    nn.CrossEntropyLoss() or 'sparse_categorical_crossentropy' (the default). ValueError names
    the first module or argument the chip cannot take; no chip program is built then.
    """
    try:
        plan = _plan_from_module(module, input_shape)
    except _Refusal as e:
        raise ValueError(str(e)) from None
    opt, loss_obj = _optimizer(optimizer), _loss(loss)
    layers, origin = _keras_layers(plan)
    shape = tuple(int(s) for s in input_shape)
    keras_shape = (shape[1], shape[2], shape[0]) if len(shape) == 3 else shape
    model = keras.Sequential([keras.Input(shape=keras_shape)] + layers,
                             name=name or "from_torch")
    try:
        model.compile(optimizer=opt, loss=loss_obj, metrics=list(metrics or []))
    except ValueError as e:  # the compiler's "layer j (Kind)": say which module that is
        raise ValueError(_name_modules(str(e), origin)) from None
    model.set_weights(_to_keras_weights(plan))
    model._torch_plan = [{k: v for k, v in e.items() if k != "module"} for e in plan]
    model._torch_input_shape = shape
    return model


def _name_modules(message, origin):
    """The compiler's layer indices (its list: the Keras layers, after an implicit Flatten when a
    Dense comes first) as the PyTorch modules they came from."""
    implicit = bool(origin) and origin[0]["kind"] == "linear"
    layers = ([None] if implicit else []) + origin

    def name(match):
        j = int(match.group(1))
        if 0 <= j < len(layers) and layers[j] is not None:
            return f"{match.group(0)}, from PyTorch module '{layers[j]['name']}'"
        return match.group(0)

    return re.sub(r"layer (\d+) \(\w+\)", name, message)


def _plan_from_keras(model):
    """A plan for a model built in tessera.keras: the canonical PyTorch form of its layers."""
    L = keras.layers
    shape = model._input_shape
    if shape is None:
        raise ValueError("to_module: the model has no input shape yet (build or fit it)")
    h, w, c = shape  # (1, values, 1) for Dense inputs: any flatten order is the identity then
    plan, flat_from = [], None
    dense = [i for i, l in enumerate(model.layers) if isinstance(l, L.Dense)]
    for i, l in enumerate(model.layers):
        if isinstance(l, L.Conv2D):
            k, s = l.kernel_size, l.strides
            if l.padding == "valid":
                pad_form, pad = 0, None
                ho, wo = (h - k) // s + 1, (w - k) // s + 1
            else:
                ho, wo = -(-h // s), -(-w // s)
                th, tw = max((ho - 1) * s + k - h, 0), max((wo - 1) * s + k - w, 0)
                if s == 1 and k % 2 == 1:
                    pad_form, pad = k // 2, None
                elif s == 1:
                    pad_form, pad = "same", None
                else:  # TensorFlow's 'same' at stride 2: the extra row and column bottom right
                    pad_form, pad = 0, (tw // 2, tw - tw // 2, th // 2, th - th // 2)
            if pad is not None:
                plan.append({"kind": "zeropad", "pad": pad})
            plan.append({"kind": "conv", "in": c, "out": l.filters, "k": k,
                         "s": s, "padding": l.padding, "pad_form": pad_form,
                         "relu": l.activation == "relu"})
            h, w, c = ho, wo, l.filters
            if l.activation == "relu":
                plan.append({"kind": "relu"})
        elif isinstance(l, L._Pool):
            plan.append({"kind": "maxpool" if isinstance(l, L.MaxPooling2D) else "avgpool",
                         "k": l.pool_size})
            h, w = h // l.pool_size, w // l.pool_size
        elif isinstance(l, L.Flatten):
            plan.append({"kind": "flatten"})
            flat_from = (c, h, w)
        elif isinstance(l, L.Dense):
            prev = plan[-1]["kind"] if plan else None
            plan.append({"kind": "linear", "in": None, "out": l.units,
                         "perm": flat_from if prev == "flatten" else None,
                         "relu": l.activation == "relu", "last": i == dense[-1]})
            if l.activation == "relu":
                plan.append({"kind": "relu"})
        elif isinstance(l, L.Dropout):
            plan.append({"kind": "dropout", "p": l.rate})
        else:
            raise ValueError(f"to_module: layer {i} ({type(l).__name__}) has no PyTorch form "
                             "here (a Normalization is the host's preprocessing: apply "
                             "(x - mean) / sqrt(variance) to PyTorch's inputs)")
    plan.append({"kind": "softmax"})  # the model's output is predict()'s: the probabilities
    return plan


def to_module(model):
    """A fresh torch.nn.Sequential (fp32, eval mode) with `model`'s current weights, the inverse
    of from_module: the imported module's structure and child names, or for a model built in
    tessera.keras its layers' PyTorch forms ending with nn.Softmax(dim=1). Its forward takes
    NCHW images (or (n, features))."""
    plan = getattr(model, "_torch_plan", None) or _plan_from_keras(model)
    weights = model.get_weights()
    mods, j = [], 0
    for e in plan:
        kind = e["kind"]
        if kind == "conv":
            k, b = weights[j], weights[j + 1]
            j += 2
            m = nn.Conv2d(e["in"], e["out"], e["k"], stride=e["s"], padding=e["pad_form"])
            with torch.no_grad():
                m.weight.copy_(torch.from_numpy(np.ascontiguousarray(k.transpose(3, 2, 0, 1))))
                m.bias.copy_(torch.from_numpy(b))
        elif kind == "linear":
            k, b = weights[j], weights[j + 1]
            j += 2
            if e["perm"] is not None:  # rows back from the chip's (h, w, c) order to (c, h, w)
                unperm = np.empty_like(k)
                unperm[_flatten_perm(*e["perm"])] = k
                k = unperm
            m = nn.Linear(k.shape[0], k.shape[1])
            with torch.no_grad():
                m.weight.copy_(torch.from_numpy(np.ascontiguousarray(k.T)))
                m.bias.copy_(torch.from_numpy(b))
        elif kind == "relu":
            m = nn.ReLU()
        elif kind == "maxpool":
            m = nn.MaxPool2d(e["k"])
        elif kind == "avgpool":
            m = nn.AvgPool2d(e["k"])
        elif kind == "flatten":
            m = nn.Flatten()
        elif kind == "dropout":
            m = nn.Dropout(e["p"])
        elif kind == "zeropad":
            m = nn.ZeroPad2d(e["pad"])
        elif kind == "softmax":
            m = nn.Softmax(dim=1)
        else:  # pragma: no cover
            raise AssertionError(kind)
        mods.append((e.get("name"), m))
    names = [n for n, _ in mods]
    if all(n is not None for n in names) and len(set(names)) == len(names):
        from collections import OrderedDict
        seq = nn.Sequential(OrderedDict(mods))
    else:
        seq = nn.Sequential(*[m for _, m in mods])
    return seq.eval()


__all__ = ["from_module", "to_module"]
