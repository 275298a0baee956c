# The Python half of `import attn` (issue 51): TransformerLens's hooks, ActivationCache and
# weights over the engine's hook points. The extension runs this file in its own namespace at
# import (python/CMakeLists.txt embeds it), so `Model` below is the extension's class; the
# engine does the work (model/hooks.hpp), this file only names things as TransformerLens does.
import contextlib as _contextlib

import numpy as _np


class HookPoint:
    """What a hook function gets besides the activation, as TransformerLens's HookPoint:
    .name ("blocks.3.attn.hook_z") and .layer() (3; None for hook_embed and ln_final's)."""

    __slots__ = ("name",)

    def __init__(self, name):
        self.name = name

    def layer(self):
        parts = self.name.split(".")
        return int(parts[1]) if parts[0] == "blocks" else None

    def __repr__(self):
        return f"HookPoint({self.name!r})"


# TransformerLens's short names (utils.get_act_name) -> a block's hook suffix.
_SHORT = {
    "resid_pre": "hook_resid_pre", "resid_mid": "hook_resid_mid",
    "resid_post": "hook_resid_post", "attn_out": "hook_attn_out", "mlp_out": "hook_mlp_out",
    "pattern": "attn.hook_pattern", "attn": "attn.hook_pattern",
    "attn_scores": "attn.hook_attn_scores", "scores": "attn.hook_attn_scores",
    "q": "attn.hook_q", "k": "attn.hook_k", "v": "attn.hook_v", "z": "attn.hook_z",
    "rot_q": "attn.hook_rot_q", "rot_k": "attn.hook_rot_k", "result": "attn.hook_result",
    "pre": "mlp.hook_pre", "post": "mlp.hook_post",
}


def get_act_name(name, layer=None, layer_type=None):
    """TransformerLens's utils.get_act_name: ("pattern", 0) -> "blocks.0.attn.hook_pattern";
    ("scale", 1, "ln2") -> "blocks.1.ln2.hook_scale"; ("embed") -> "hook_embed";
    ("scale") or ("normalized") -> ln_final's."""
    if name == "embed":
        return "hook_embed"
    if layer is None and name in ("scale", "normalized"):
        return f"ln_final.hook_{name}"
    if name == "scale":
        return f"blocks.{layer}.{layer_type or 'ln1'}.hook_scale"
    if name not in _SHORT or layer is None:
        raise KeyError(f"{name!r}: not a short hook name with a layer (TransformerLens's "
                       "get_act_name: pattern, z, resid_pre, ..., scale)")
    return f"blocks.{int(layer)}.{_SHORT[name]}"


class ActivationCache(dict):
    """run_with_cache's activations by hook name, as TransformerLens's ActivationCache: a dict
    (batch dimension kept) with cache["pattern", 0], the residual stream's decompositions and
    the direct logit attribution. The model's norms are RMSNorms on raw weights: apply_ln_to_stack
    divides by the cached scale (TransformerLens's folding of the norm with the scale fixed at
    the run's value: exact for the sum of the components, an approximation for each alone), and
    logit_attrs multiplies by the final norm's weight before W_U (what fold_ln puts in W_U)."""

    def __init__(self, cache, model):
        super().__init__(cache)
        self.model = model

    def __getitem__(self, key):
        if isinstance(key, tuple):
            key = get_act_name(*key)
        elif key in ("embed", "scale", "normalized"):  # the points without a layer
            key = get_act_name(key)
        return dict.__getitem__(self, key)

    def _n_layers(self):
        return self.model.args.n_layers

    def _layer(self, layer):
        n = self._n_layers()
        return n if layer is None or layer == -1 else int(layer)

    def accumulated_resid(self, layer=None, incl_mid=False, apply_ln=False, pos_slice=None,
                          mlp_input=False, return_labels=False):
        """The residual stream before layer 0, 1, ... up to `layer` (None: the last block's
        output too), [components, batch, pos, d_model], with resid_mid between them when
        incl_mid; apply_ln: as the input of `layer`'s norm (apply_ln_to_stack)."""
        layer = self._layer(layer)
        n = self._n_layers()
        parts, labels = [], []
        for l in range(layer + 1):
            if l == n:
                parts.append(self["resid_post", n - 1])
                labels.append("final_post")
                continue
            parts.append(self["resid_pre", l])
            labels.append(f"{l}_pre")
            if (incl_mid and l < layer) or (mlp_input and l == layer):
                parts.append(self["resid_mid", l])
                labels.append(f"{l}_mid")
        stack = _sliced(_np.stack(parts), pos_slice)
        if apply_ln:
            stack = self.apply_ln_to_stack(stack, layer, mlp_input=mlp_input, pos_slice=pos_slice)
        return (stack, labels) if return_labels else stack

    def decompose_resid(self, layer=None, mlp_input=False, mode="all", apply_ln=False,
                        pos_slice=None, incl_embeds=True, return_labels=False):
        """The residual stream before `layer` (None: the model's output) as the sum of its
        parts: hook_embed, then each block's attn_out and mlp_out (mode "attn" or "mlp": only
        those), [components, batch, pos, d_model]."""
        layer = self._layer(layer)
        parts, labels = [], []
        if incl_embeds:
            parts.append(self["hook_embed"])
            labels.append("embed")
        for l in range(layer + 1):
            if l == self._n_layers():
                break
            if mode in ("all", "attn") and (l < layer or mlp_input):
                parts.append(self["attn_out", l])
                labels.append(f"{l}_attn_out")
            if mode in ("all", "mlp") and l < layer:
                parts.append(self["mlp_out", l])
                labels.append(f"{l}_mlp_out")
        stack = _sliced(_np.stack(parts), pos_slice)
        if apply_ln:
            stack = self.apply_ln_to_stack(stack, layer, mlp_input=mlp_input, pos_slice=pos_slice)
        return (stack, labels) if return_labels else stack

    def stack_head_results(self, layer=None, return_labels=False, incl_remainder=False,
                           pos_slice=None, apply_ln=False):
        """Each head's output (attn.hook_result) of the blocks before `layer` (None: all),
        [layer * n_heads, batch, pos, d_model], labels "L{l}H{h}"; incl_remainder adds the
        residual minus their sum (embeddings, MLPs, biases)."""
        layer = self._layer(layer)
        parts, labels = [], []
        for l in range(layer):
            r = self["result", l]  # [batch, pos, head, d_model]
            for h in range(r.shape[2]):
                parts.append(r[:, :, h])
                labels.append(f"L{l}H{h}")
        stack = _np.stack(parts) if parts else _np.zeros((0,) + self["hook_embed"].shape,
                                                          _np.float32)
        if incl_remainder:
            resid = (self["resid_post", layer - 1] if layer == self._n_layers()
                     else self["resid_pre", layer])
            stack = _np.concatenate([stack, (resid - stack.sum(0))[None]])
            labels.append("remainder")
        stack = _sliced(stack, pos_slice)
        if apply_ln:
            stack = self.apply_ln_to_stack(stack, layer, pos_slice=pos_slice)
        return (stack, labels) if return_labels else stack

    def apply_ln_to_stack(self, residual_stack, layer=None, mlp_input=False, pos_slice=None,
                          has_batch_dim=True):
        """Components of the residual stream [..., batch, pos, d_model] as the input of
        `layer`'s norm (ln2's with mlp_input; None or n_layers: ln_final's) sees them: divided
        by its cached scale [batch, pos, 1], which the whole residual set (held fixed, as
        TransformerLens does). The norm's weight is not applied (TransformerLens folds it into
        the next weights: logit_attrs applies the final one)."""
        layer = self._layer(layer)
        if layer == self._n_layers():
            scale = self["ln_final.hook_scale"]
        else:
            scale = self[f"blocks.{layer}.ln{2 if mlp_input else 1}.hook_scale"]
        scale = _sliced(scale, pos_slice, axis=1)
        if not has_batch_dim:
            scale = scale[0]
        return _np.asarray(residual_stack, _np.float64) / scale

    def logit_attrs(self, residual_stack, tokens, incorrect_tokens=None, pos_slice=None,
                    has_batch_dim=True):
        """Direct logit attribution: each component of residual_stack [components, ..., d_model]
        (apply_ln_to_stack'ed here, as the final norm's input) dotted with the logit direction of
        tokens (an id, or ids of the stack's leading batch/pos shape): the final norm's weight
        times W_U's column (minus incorrect_tokens' when given), in float64. Summed over the
        components of the whole residual stream, the token's logit."""
        directions = self.model.tokens_to_residual_directions(tokens)
        if incorrect_tokens is not None:
            directions = directions - self.model.tokens_to_residual_directions(incorrect_tokens)
        scaled = self.apply_ln_to_stack(residual_stack, None, pos_slice=pos_slice,
                                        has_batch_dim=has_batch_dim)
        return (scaled * directions).sum(-1)


def _sliced(x, pos_slice, axis=2):
    """x with TransformerLens's pos_slice (None, an int or a slice) taken on its pos axis."""
    if pos_slice is None:
        return x
    index = [slice(None)] * x.ndim
    index[axis] = pos_slice
    return x[tuple(index)]


class _Weights:
    """model.W_Q[l] and the like: a layer's weight in TransformerLens's shape, a read-only view
    of an F32 tensor; .widened(l) a float32 copy for another type."""

    def __init__(self, model, kind, shape_of, doc):
        self._model, self._kind, self._shape_of, self.__doc__ = model, kind, shape_of, doc

    def __len__(self):
        return self._model.args.n_layers

    def __getitem__(self, layer):
        return self._get(layer, False)

    def widened(self, layer):
        return self._get(layer, True)

    def _get(self, layer, widen):
        if not isinstance(layer, int) or isinstance(layer, bool):
            raise TypeError(f"layer: expected an int, got {type(layer).__name__}")
        if layer < 0:
            layer += len(self)
        return self._shape_of(self._model.weight(self._kind, layer, widen), self._model.args)


def _per_head(heads_attr):
    """[heads * d_head, d_model] -> [heads, d_model, d_head] (W_Q, W_K, W_V)."""
    def shape(w, a):
        heads = getattr(a, heads_attr)
        return w.reshape(heads, a.head_dim, a.dim).transpose(0, 2, 1)
    return shape


_WEIGHTS = {
    "W_Q": ("wq", _per_head("n_heads"), "[n_heads, d_model, d_head]"),
    "W_K": ("wk", _per_head("n_kv_heads"), "[n_kv_heads, d_model, d_head] (per KV head)"),
    "W_V": ("wv", _per_head("n_kv_heads"), "[n_kv_heads, d_model, d_head] (per KV head)"),
    "W_O": ("wo", lambda w, a: w.reshape(a.dim, a.n_heads, a.head_dim).transpose(1, 2, 0),
            "[n_heads, d_head, d_model]"),
    "W_gate": ("w1", lambda w, a: w.T, "[d_model, d_mlp]"),
    "W_in": ("w3", lambda w, a: w.T, "[d_model, d_mlp]"),
    "W_out": ("w2", lambda w, a: w.T, "[d_mlp, d_model]"),
    "ln1_w": ("attention_norm", lambda w, a: w, "[d_model]"),
    "ln2_w": ("ffn_norm", lambda w, a: w, "[d_model]"),
}


def _weights_property(name, kind, shape_of, doc):
    def get(self):
        return _Weights(self, kind, shape_of, f"model.{name}[layer]: {doc}")
    return property(get, doc=f"{name}[layer]: {doc}; .widened(layer) for a non-F32 file")


for _name, (_kind, _shape_of, _doc) in _WEIGHTS.items():
    setattr(Model, _name, _weights_property(_name, _kind, _shape_of, _doc))

Model.W_E = property(lambda self: self.weight("tok_embeddings"),
                     doc="[d_vocab, d_model]: the embeddings (F32 view; weight(..., widen=True))")
Model.W_U = property(lambda self: self.weight("output").T,
                     doc="[d_model, d_vocab]: the output head (F32 view; weight(..., widen=True))")
Model.ln_final_w = property(lambda self: self.weight("norm"), doc="[d_model]: the final norm")


def _cfg(self):
    """TransformerLens's cfg names for this model's config (args has ours)."""
    a = self.args
    return {"n_layers": a.n_layers, "d_model": a.dim, "n_heads": a.n_heads,
            "n_key_value_heads": a.n_kv_heads, "d_head": a.head_dim, "d_mlp": a.ffn_hidden,
            "d_vocab": a.vocab_size, "n_ctx": a.max_seq_len, "eps": a.norm_eps,
            "rotary_base": a.rope_theta, "normalization_type": "RMS",
            "positional_embedding_type": "rotary", **a.to_dict()}


Model.cfg = property(_cfg, doc=_cfg.__doc__)


def _tokens_to_residual_directions(self, tokens):
    """The residual direction whose dot with the final norm's input (divided by its scale) is a
    token's logit: the final norm's weight times W_U[:, token] (divided by Granite's logit
    scale), float64; tokens an id or ids of any shape -> shape + [d_model]."""
    ids = _np.asarray(tokens)
    if ids.dtype.kind not in "iu":
        raise TypeError(f"tokens: expected token ids, got dtype {ids.dtype}")
    norm = _np.asarray(self.weight("norm"), _np.float64)
    flat = [int(i) for i in ids.reshape(-1)]  # only these rows widened, whatever the type
    rows = _np.asarray(self.weight("output", rows=flat), _np.float64).reshape(ids.shape + (-1,))
    scale = self.args.to_dict().get("logit_scale", 1) or 1
    return rows * norm / scale


Model.tokens_to_residual_directions = _tokens_to_residual_directions


# Hooks: (names, function, permanent) added by add_hook or a hooks() context, applied to every
# forward, run_with_cache, run_with_hooks and generate call until removed.
def _hooks_of(model):
    if "_attn_hooks" not in model.__dict__:
        model.__dict__["_attn_hooks"] = []
    return model.__dict__["_attn_hooks"]


def _names(model, name_or_filter, what):
    if isinstance(name_or_filter, str):
        if name_or_filter not in model.hook_names:
            raise ValueError(f"{what}: {name_or_filter!r} is not a hook point of this model "
                             "(model.hook_names lists them)")
        return [name_or_filter]
    if callable(name_or_filter):
        return [n for n in model.hook_names if name_or_filter(n)]
    raise TypeError(f"{what}: expected a hook name or a function name -> bool, got "
                    f"{type(name_or_filter).__name__}")


def _add(model, fwd_hooks, what, permanent=False):
    added = []
    if not isinstance(fwd_hooks, (list, tuple)):
        raise TypeError(f"{what}: expected a list of (name or filter, function) pairs, got "
                        f"{type(fwd_hooks).__name__}")
    for pair in fwd_hooks:
        if not isinstance(pair, (list, tuple)) or len(pair) != 2 or not callable(pair[1]):
            raise TypeError(f"{what}: expected (name or filter, function) pairs, got {pair!r}")
        added.append((tuple(_names(model, pair[0], what)), pair[1], permanent))
    _hooks_of(model).extend(added)
    return added


def _remove(model, entries):
    hooks = _hooks_of(model)
    for e in entries:
        for i, h in enumerate(hooks):
            if h is e:
                del hooks[i]
                break


def _chain(fns, name):
    """One patch function for the engine from a point's functions, each TransformerLens's
    fn(activation, hook) -> replacement or None, in the order added."""
    hook = HookPoint(name)

    def run(act, _name):
        replaced = False
        for fn in fns:
            r = fn(act, hook)
            if r is not None:
                act = _np.ascontiguousarray(r, dtype=_np.float32)
                replaced = True
        return act if replaced else None
    return run


def _patch_with_hooks(model, patch, extra=()):
    """forward's patch dict with the model's hooks (and a call's own, extra) added: the patch's
    own entries first (arrays and functions of (activation, name)), then the hooks in order."""
    hooks = list(_hooks_of(model)) + list(extra)
    if not hooks:
        return patch
    if patch is not None and not isinstance(patch, dict):
        raise TypeError(f"patch: expected a dict {{hook name: array or function}}, got "
                        f"{type(patch).__name__}")
    fns = {}
    for name, value in (patch or {}).items():
        if callable(value):
            fns.setdefault(name, []).append(lambda a, h, f=value: f(a, h.name))
        else:
            fns.setdefault(name, []).append(lambda a, h, v=value: v)
    for names, fn, _ in hooks:
        for name in names:
            fns.setdefault(name, []).append(fn)
    return {name: _chain(chain, name) for name, chain in fns.items()}


_engine_forward = Model.forward
_engine_run_with_cache = Model.run_with_cache
_engine_generate = Model.generate


def _forward(self, tokens, start_pos=0, all_positions=False, patch=None):
    return _engine_forward(self, tokens, start_pos=start_pos, all_positions=all_positions,
                           patch=_patch_with_hooks(self, patch))


_forward.__doc__ = _engine_forward.__doc__ + (
    "; the hooks of hooks() and add_hook apply too (after patch's own)")


def _run_with_cache(self, tokens, names=None, start_pos=0, all_positions=True, patch=None,
                    max_bytes=None, names_filter=None):
    if names_filter is not None:
        if names is not None:
            raise TypeError("names and names_filter are the same setting: give one")
        names = names_filter
    logits, cache = _engine_run_with_cache(
        self, tokens, names=names, start_pos=start_pos, all_positions=all_positions,
        patch=_patch_with_hooks(self, patch), max_bytes=max_bytes)
    return logits, ActivationCache(cache, self)


_run_with_cache.__doc__ = _engine_run_with_cache.__doc__ + (
    "; the activations as an ActivationCache (a dict by hook name with TransformerLens's "
    "methods); names_filter is TransformerLens's name for names")


def _generate(self, prompt, *args, patch=None, **kwargs):
    return _engine_generate(self, prompt, *args, patch=_patch_with_hooks(self, patch), **kwargs)


_generate.__doc__ = _engine_generate.__doc__


@_contextlib.contextmanager
def _hooks_context(self, fwd_hooks=(), bwd_hooks=(), reset_hooks_end=True,
                   clear_contexts=False):
    """TransformerLens's hooks(): fwd_hooks [(hook name or filter, fn(activation, hook))] on
    every call inside the block (forward, run_with_cache, generate at every step); fn gets the
    activation (a float32 copy: editing it in place or returning an array replaces it) and a
    HookPoint (.name, .layer()). Removed on leaving unless reset_hooks_end=False."""
    if bwd_hooks:
        raise ValueError("bwd_hooks: the engine has no backward pass")
    added = _add(self, list(fwd_hooks), "fwd_hooks")
    try:
        yield self
    finally:
        if reset_hooks_end:
            _remove(self, added)


def _run_with_hooks(self, *model_args, fwd_hooks=(), bwd_hooks=(), reset_hooks_end=True,
                    clear_contexts=False, **model_kwargs):
    """TransformerLens's run_with_hooks: forward(*model_args, **model_kwargs) with fwd_hooks
    (as hooks()) for this call only."""
    with _hooks_context(self, fwd_hooks, bwd_hooks, reset_hooks_end, clear_contexts):
        return self.forward(*model_args, **model_kwargs)


def _add_hook(self, name, hook, dir="fwd", is_permanent=False):
    """TransformerLens's add_hook: hook (fn(activation, hook)) on the point `name` (or every
    point a function name -> bool accepts) until reset_hooks() (is_permanent: until
    reset_hooks(including_permanent=True))."""
    if dir != "fwd":
        raise ValueError(f"dir: only 'fwd' (the engine has no backward pass), got {dir!r}")
    _add(self, [(name, hook)], "name", bool(is_permanent))


def _reset_hooks(self, clear_contexts=True, direction="both", including_permanent=False):
    """TransformerLens's reset_hooks: removes the hooks add_hook added (the permanent ones too
    with including_permanent)."""
    hooks = _hooks_of(self)
    hooks[:] = [h for h in hooks if h[2] and not including_permanent]


def _logit_lens(self, tokens, start_pos=0):
    """The logit lens of forward(tokens, start_pos) as attn-cli's --logit-lens computes it:
    each block's output through the final norm and the head, [n_layers, batch, pos, d_vocab]
    (the last block's is the model's logits)."""
    return self._logit_lens(tokens, start_pos)[0]


Model.forward = _forward
Model.run_with_cache = _run_with_cache
Model.generate = _generate
Model.hooks = _hooks_context
Model.run_with_hooks = _run_with_hooks
Model.add_hook = _add_hook
Model.reset_hooks = _reset_hooks
Model.logit_lens = _logit_lens
