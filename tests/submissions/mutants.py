"""Wrong implementations (mutants): each is one classic mistake in one solution cell.

A mutant is the reference answer with an edit (``edit=(old, new)``, or a tuple of such pairs,
each checked to apply) or a whole replacement (``code``). ``lost`` says how many points each
grade cell of that notebook must lose (the others keep full marks), ``says`` a phrase its
feedback must contain (the mistake named in plain words; ``also``: other true names, e.g. each half of
two mistakes, where a cell sees one of them), ``visible`` whether the visible tests
alone let it through (since issue 9 none does: the visible tests use small all-different inputs
with biases, a mask and T_q != T_k, so every mistake that small inputs can show fails them).
``source`` cites the public repository and path a mutant was adapted from (empty: our own).
"""
from dataclasses import dataclass


@dataclass(frozen=True)
class Mutant:
    student: str
    notebook: str
    cell: str
    lost: dict
    says: str
    visible: bool
    edit: tuple = ()
    code: str = ""
    source: str = ""
    also: tuple = ()  # other phrases that name its mistake truly (a pair of mistakes, where one cell sees one)

    def answer(self, reference: str) -> str:
        if self.code:
            return self.code
        edits = self.edit if isinstance(self.edit[0], tuple) else (self.edit,)
        for old, new in edits:
            assert old in reference, f"{self.student}: {old!r} is not in the reference answer"
            reference = reference.replace(old, new)
        return reference


P, S, M, O, A = "01_project", "02_split_heads", "03_merge_heads", "04_output_projection", "05_assembly"
MHA = "multi_head_attention"
ALL_MHA = {"test_mha_shapes": 1, "test_mha_weights": 1, "test_mha_self_attention": 1, "test_mha_causal": 1,
           "test_mha_cross": 1}
VALUES_MHA = {"test_mha_self_attention": 1, "test_mha_causal": 1, "test_mha_cross": 1}
MASKED = {"test_mha_weights": 1, "test_mha_causal": 1, "test_mha_cross": 1}
_HEADS_LOOP = (  # exercise 5 with the heads in a loop: a base for mutants that lose or add something per head
    "def multi_head_attention(query, key, value, mha, causal=False):\n"
    "    h = mha.num_heads\n    d_k = query.shape[-1] // h\n"
    "    w_q, w_k, w_v = mha.in_proj_weight.chunk(3)\n    b_q, b_k, b_v = mha.in_proj_bias.chunk(3)\n"
    "    q, k, v = F.linear(query, w_q, b_q), F.linear(key, w_k, b_k), F.linear(value, w_v, b_v)\n"
    "    outs, weights = [], []\n"
    "    for i in range(h):\n"
    "        cols = slice(i * d_k, (i + 1) * d_k)\n"
    "        scores = q[..., cols] @ k[..., cols].transpose(-2, -1) / math.sqrt(d_k)\n"
    "        if causal:\n"
    "            scores = scores.masked_fill(~torch.ones(scores.shape[-2:], dtype=torch.bool).tril(), float('-inf'))\n"
    "        w = torch.softmax(scores, dim=-1)\n"
    "        outs.append(w @ v[..., cols])\n        weights.append(w)\n"
    "    concat = torch.cat(outs, dim=-1)\n    out = F.linear(concat, mha.out_proj.weight, mha.out_proj.bias)\n"
    "    return out, torch.stack(weights, dim=1)\n")

MUTANTS = [
    # --- 1. projections ---------------------------------------------------------------------
    Mutant("m01_project_no_bias", P, "project", {"test_project_bias": 1}, "the bias was left out", False,
           edit=("out = out + b  #", "out = out  #")),
    Mutant("m02_project_w_transposed", P, "project", {"test_project_values": 1, "test_project_bias": 1},
           "w used transposed", False, edit=("out = x @ w ", "out = x @ w.T ")),
    Mutant("m03_project_bias_first", P, "project", {"test_project_bias": 1},
           "the bias added before the product", False,
           code="def project(x, w, b=None):\n    return x @ w if b is None else (x + b) @ w\n"),
    Mutant("m04_fuse_interleaved", P, "fuse_heads", {"test_fuse_heads": 1}, "heads interleaved", False,
           edit=("w = np.concatenate(w_heads, axis=1)", "w = np.stack(w_heads, axis=-1).reshape(len(w_heads[0]), -1)")),
    Mutant("m05_fuse_bias_dropped", P, "fuse_heads", {"test_fuse_heads": 1}, "the biases were not fused", False,
           edit=("b = None if b_heads is None else np.concatenate(b_heads)", "b = None")),
    # --- 2. split ---------------------------------------------------------------------------
    Mutant("m06_split_no_transpose", S, "split_heads", {"test_split_heads_values": 1}, "reshape without transpose",
           False, code="def split_heads(x, num_heads):\n    batch, t, d = x.shape\n"
                       "    return x.reshape(batch, num_heads, t, d // num_heads)\n"),
    Mutant("m07_split_batch_time_mixed", S, "split_heads", {"test_split_heads_shape": 1, "test_split_heads_values": 1},
           "B and T mixed up", False, edit=("x.reshape(batch, t,", "x.reshape(t, batch,")),
    Mutant("m08_split_ready_made", S, "split_heads", {"test_split_heads_shape": 1, "test_split_heads_values": 1},
           "ready-made answer", False,
           code="from mha_lib import reference\n\ndef split_heads(x, num_heads):\n"
                "    return reference.split_heads(x, num_heads)\n"),
    # --- 3. merge ---------------------------------------------------------------------------
    Mutant("m09_merge_no_transpose", M, "merge_heads", {"test_merge_heads_values": 1}, "reshape without transpose",
           False, edit=("x = x.transpose(0, 2, 1, 3)", "pass")),
    Mutant("m10_merge_wrong_axis_order", M, "merge_heads", {"test_merge_heads_values": 1},
           "merged in the wrong axis order", False, edit=("x.transpose(0, 2, 1, 3)", "x.transpose(0, 2, 3, 1)")),
    Mutant("m11_merge_heads_averaged", M, "merge_heads", {"test_merge_heads_shape": 1, "test_merge_heads_values": 1},
           "heads averaged instead of concatenated", False,
           code="def merge_heads(x):\n    return x.mean(axis=1)\n"),
    # --- 4. W^O -----------------------------------------------------------------------------
    Mutant("m12_out_no_bias", O, "output_projection", {"test_output_projection_bias": 1},
           "the output bias b_o was left out", False, edit=("out = out + b_o", "out = out")),
    Mutant("m13_out_w_transposed", O, "output_projection",
           {"test_output_projection_values": 1, "test_output_projection_bias": 1}, "W^O used transposed", False,
           edit=("out = x @ w_o ", "out = x @ w_o.T ")),
    Mutant("m14_out_bias_first", O, "output_projection", {"test_output_projection_bias": 1},
           "the bias added before W^O", False,
           code="def output_projection(x, w_o, b_o=None):\n    return x @ w_o if b_o is None else (x + b_o) @ w_o\n"),
    Mutant("m15_per_head_bias_each_head", O, "output_projection_per_head", {"test_output_projection_per_head": 1},
           "the bias added once per head", False,
           code="def output_projection_per_head(heads, w_o, b_o=None):\n    d_v = heads.shape[-1]\n"
                "    out = 0\n    for i in range(heads.shape[1]):\n"
                "        out = out + heads[:, i] @ w_o[i * d_v:(i + 1) * d_v]\n"
                "        if b_o is not None:\n            out = out + b_o\n    return out\n"),
    Mutant("m16_per_head_no_bias", O, "output_projection_per_head", {"test_output_projection_per_head": 1},
           "the output bias b_o was left out", False, edit=("out = out + b_o  #", "out = out  #")),
    Mutant("m17_per_head_averaged", O, "output_projection_per_head", {"test_output_projection_per_head": 1},
           "heads averaged instead of summed", False,
           edit=("for i in range(heads.shape[1]))", "for i in range(heads.shape[1])) / heads.shape[1]")),
    # --- 5. the assembly --------------------------------------------------------------------
    Mutant("m18_scaled_by_d_model", A, MHA, VALUES_MHA, "sqrt(d_model) instead of sqrt(d_k)", False,
           edit=("/ math.sqrt(d_k)", "/ math.sqrt(d_model)")),
    Mutant("m19_not_scaled", A, MHA, VALUES_MHA, "scores not scaled", False, edit=(" / math.sqrt(d_k)", "")),
    Mutant("m20_softmax_wrong_axis", A, MHA, {"test_mha_weights": 1, **VALUES_MHA}, "softmax over the wrong axis",
           False, edit=("torch.softmax(scores, dim=-1)", "torch.softmax(scores, dim=-2)")),
    Mutant("m21_mask_after_softmax", A, MHA, {"test_mha_weights": 1, "test_mha_causal": 1, "test_mha_cross": 1},
           "mask applied after the softmax", False,
           edit=("        scores = scores.masked_fill(~allowed, float(\"-inf\"))            # before the softmax\n"
                 "    weights = torch.softmax(scores, dim=-1)                             # each row sums to 1\n",
                 "    weights = torch.softmax(scores, dim=-1)\n"
                 "    if causal:\n        weights = weights.masked_fill(~allowed, 0.0)\n")),
    Mutant("m22_mask_inverted", A, MHA, {"test_mha_weights": 1, "test_mha_causal": 1, "test_mha_cross": 1},
           "mask the wrong way round", False, edit=(".tril()", ".triu()")),
    Mutant("m23_no_w_o", A, MHA, VALUES_MHA, "W^O was forgotten", False,
           edit=("out = F.linear(concat, mha.out_proj.weight, mha.out_proj.bias)", "out = concat")),
    Mutant("m24_no_output_bias", A, MHA, VALUES_MHA, "the output bias was left out", False,
           edit=("mha.out_proj.weight, mha.out_proj.bias)", "mha.out_proj.weight)")),
    Mutant("m25_no_input_bias", A, MHA, VALUES_MHA, "the input-projection biases were left out", False,
           edit=("return F.linear(x, w, b)", "return F.linear(x, w)")),
    Mutant("m26_weights_not_transposed", A, MHA, VALUES_MHA, "weights not transposed", False,
           edit=(("return F.linear(x, w, b)", "return (x @ w + b)"),
                 ("F.linear(concat, mha.out_proj.weight, mha.out_proj.bias)",
                  "concat @ mha.out_proj.weight + mha.out_proj.bias"))),
    Mutant("m27_q_k_swapped", A, MHA, VALUES_MHA, "queries and keys projected with each other's weights", False,
           edit=(("w_q, w_k, w_v = mha.in_proj_weight.chunk(3)", "w_k, w_q, w_v = mha.in_proj_weight.chunk(3)"),
                 ("b_q, b_k, b_v = mha.in_proj_bias.chunk(3)", "b_k, b_q, b_v = mha.in_proj_bias.chunk(3)"))),
    Mutant("m28_split_no_transpose", A, MHA, VALUES_MHA, "split into heads by a reshape without transpose", False,
           edit=(".reshape(batch, -1, h, d_k).transpose(1, 2)", ".reshape(batch, h, -1, d_k)")),
    Mutant("m29_merge_wrong_axis_order", A, MHA, VALUES_MHA, "heads merged in the wrong axis order", False,
           edit=("(weights @ v).transpose(1, 2).reshape", "(weights @ v).permute(0, 2, 3, 1).reshape")),
    Mutant("m30_kv_from_query", A, MHA, {"test_mha_shapes": 1, "test_mha_weights": 1, "test_mha_cross": 1},
           "keys and values computed from the query", False,
           edit=("split(key, w_k, b_k), split(value, w_v, b_v)", "split(query, w_k, b_k), split(query, w_v, b_v)")),
    Mutant("m31_mask_square", A, MHA, {"test_mha_shapes": 1, "test_mha_weights": 1, "test_mha_cross": 1}, "causal mask built for T_q x T_q", False,
           edit=("torch.ones(t_q, t_k,", "torch.ones(t_q, t_q,")),
    Mutant("m32_heads_averaged", A, MHA, ALL_MHA, "heads averaged instead of concatenated", False,
           edit=("(weights @ v).transpose(1, 2).reshape(batch, t_q, d_model)", "(weights @ v).mean(1)")),
    Mutant("m33_ready_made_sdpa", A, MHA, ALL_MHA, "F.scaled_dot_product_attention", False,
           edit=("concat = (weights @ v)", "concat = F.scaled_dot_product_attention(q, k, v, is_causal=causal)")),
    Mutant("m34_ready_made_module", A, MHA, ALL_MHA, "the module called", False,
           code="def multi_head_attention(query, key, value, mha, causal=False):\n"
                "    mask = None\n    if causal:\n"
                "        mask = torch.ones(query.shape[1], key.shape[1], dtype=torch.bool).triu(1)\n"
                "    return mha(query, key, value, attn_mask=mask, average_attn_weights=False)\n"),
    # --- found since issue 9: our own, and adapted from public code (``source``) ------------------
    Mutant("m35_project_bias_twice", P, "project", {"test_project_bias": 1}, "the bias added twice", False,
           edit=("out = out + b  #", "out = out + 2 * b  #")),
    Mutant("m36_project_scaled", P, "project", {"test_project_values": 1, "test_project_bias": 1},
           "the product divided by sqrt(d_in)", False,
           edit=("out = x @ w ", "out = x @ w / np.sqrt(w.shape[0]) ")),
    Mutant("m37_project_none_bias", P, "project", {"test_project_values": 1, "test_project_bias": 1}, "b=None not handled", False,
           code="def project(x, w, b=None):\n    return x @ w + b\n"),
    Mutant("m38_project_batched_only", P, "project", {"test_project_values": 1, "test_project_bias": 1},
           "unbatched", False,
           code="def project(x, w, b=None):\n    out = np.einsum('bti,io->bto', x, w)\n"
                "    return out if b is None else out + b\n"),
    Mutant("m39_fuse_reversed", P, "fuse_heads", {"test_fuse_heads": 1}, "heads in reverse order", False,
           edit=(("np.concatenate(w_heads, axis=1)", "np.concatenate(w_heads[::-1], axis=1)"),
                 ("np.concatenate(b_heads)", "np.concatenate(b_heads[::-1])"))),
    Mutant("m40_fuse_not_a_pair", P, "fuse_heads", {"test_fuse_heads": 1}, "the fused w returned alone", False,
           code="def fuse_heads(w_heads, b_heads=None):\n    return np.concatenate(w_heads, axis=1)\n"),
    Mutant("m41_fuse_bias_stacked", P, "fuse_heads", {"test_fuse_heads": 1}, "the biases stacked as (h, d_k)",
           False, edit=("np.concatenate(b_heads)", "np.stack(b_heads)")),
    Mutant("m42_split_strided", S, "split_heads", {"test_split_heads_values": 1}, "heads interleaved", False,
           code="def split_heads(x, num_heads):\n    batch, t, d = x.shape\n"
                "    return x.reshape(batch, t, d // num_heads, num_heads).transpose(0, 3, 1, 2)\n"),
    Mutant("m43_split_wrong_swap", S, "split_heads", {"test_split_heads_shape": 1, "test_split_heads_values": 1},
           "the wrong axes swapped", False, edit=("x.transpose(0, 2, 1, 3)", "x.transpose(0, 2, 3, 1)")),
    Mutant("m44_split_heads_first", S, "split_heads", {"test_split_heads_shape": 1, "test_split_heads_values": 1},
           "transpose(2, 0, 1, 3)", False,
           code="def split_heads(x, num_heads):\n    return np.stack(np.split(x, num_heads, axis=-1), axis=0)\n"),
    Mutant("m45_split_in_place", S, "split_heads", {"test_split_heads_shape": 1, "test_split_heads_values": 1},
           "in place", False,
           code="def split_heads(x, num_heads):\n    batch, t, d = x.shape\n"
                "    x.shape = (batch, t, num_heads, d // num_heads)\n    return x.transpose(0, 2, 1, 3)\n"),
    Mutant("m46_split_2d_recipe", S, "split_heads", {"test_split_heads_shape": 1, "test_split_heads_values": 1},
           "transpose(1, 0, 2, 3)", False,
           code="def split_heads(x, num_heads):\n    d_k = x.shape[-1] // num_heads\n"
                "    return x.reshape(x.shape[0], num_heads, -1, d_k).transpose(1, 0, 2, 3)\n",
           source="thealper2/deep-ml-solutions:implement_multi_head_attention.py (2-D reshape/transpose(1, 0, 2) "
                  "applied to a batch)"),
    Mutant("m47_split_transpose_perm", S, "split_heads", {"test_split_heads_shape": 1, "test_split_heads_values": 1},
           "perm", False,
           code="def split_heads(x, num_heads):\n    batch, t, d = x.shape\n"
                "    x = x.reshape(batch, t, num_heads, d // num_heads)\n"
                "    return np.transpose(x, perm=[0, 2, 1, 3])\n",
           source="RasKrebs/llms4code_code_quality:multihead-attention/gpt-4-turbo/medium.py (np.transpose with "
                  "TensorFlow's perm=)"),
    Mutant("m48_merge_b_t_swapped", M, "merge_heads", {"test_merge_heads_values": 1}, "B and T swapped", False,
           edit=("x = x.transpose(0, 2, 1, 3)", "x = x.transpose(2, 0, 1, 3)")),
    Mutant("m49_merge_along_time", M, "merge_heads", {"test_merge_heads_shape": 1, "test_merge_heads_values": 1},
           "along time", False, code="def merge_heads(x):\n    batch, h, t, d_v = x.shape\n"
                                     "    return x.reshape(batch, h * t, d_v)\n"),
    Mutant("m50_merge_summed", M, "merge_heads", {"test_merge_heads_shape": 1, "test_merge_heads_values": 1},
           "heads summed instead of concatenated", False, code="def merge_heads(x):\n    return x.sum(axis=1)\n"),
    Mutant("m51_merge_concat_axis_1", M, "merge_heads", {"test_merge_heads_shape": 1, "test_merge_heads_values": 1},
           "along time", False,
           code="def merge_heads(x):\n    return np.concatenate([x[:, i] for i in range(x.shape[1])], axis=1)\n"),
    Mutant("m52_out_bias_twice", O, "output_projection", {"test_output_projection_bias": 1},
           "the bias added twice", False, edit=("out = out + b_o", "out = out + b_o + b_o")),
    Mutant("m53_out_none_bias", O, "output_projection", {"test_output_projection_values": 1, "test_output_projection_bias": 1},
           "b_o=None not handled", False, code="def output_projection(x, w_o, b_o=None):\n    return x @ w_o + b_o\n"),
    Mutant("m54_per_head_first_block", O, "output_projection_per_head", {"test_output_projection_per_head": 1},
           "the first block of W^O", False, edit=("w_o[i * d_v:(i + 1) * d_v]", "w_o[0:d_v]")),
    Mutant("m55_per_head_concat_no_transpose", O, "output_projection_per_head",
           {"test_output_projection_per_head": 1}, "reshape without transpose", False,
           code="def output_projection_per_head(heads, w_o, b_o=None):\n    b, h, t, d_v = heads.shape\n"
                "    out = heads.reshape(b, t, h * d_v) @ w_o\n    return out if b_o is None else out + b_o\n"),
    Mutant("m56_mha_scaled_by_d_k", A, MHA, VALUES_MHA, "d_k instead of sqrt(d_k)", False,
           edit=("/ math.sqrt(d_k)", "/ d_k")),
    Mutant("m57_mha_scale_multiplied", A, MHA, VALUES_MHA, "multiplied by sqrt(d_k) instead of divided", False,
           edit=("/ math.sqrt(d_k)", "* math.sqrt(d_k)")),
    Mutant("m58_mha_scaled_by_sqrt_h", A, MHA, VALUES_MHA, "sqrt(h)", False, edit=("/ math.sqrt(d_k)", "/ math.sqrt(h)"),
           source="ise-uiuc/WhiteFox:starcoder-generated/torch-inductor-generated/step86-3shot/sfdp=1/sfdp=1_10.py "
                  "(scores divided by sqrt(num_heads))"),
    Mutant("m59_mha_no_mask", A, MHA, {"test_mha_weights": 1, "test_mha_causal": 1, "test_mha_cross": 1},
           "causal mask not applied", False,
           edit=("scores = scores.masked_fill(~allowed, float(\"-inf\"))", "scores = scores")),
    Mutant("m60_mha_mask_always", A, MHA, {"test_mha_weights": 1, "test_mha_self_attention": 1, "test_mha_cross": 1},
           "although causal=False", False, edit=("    if causal:\n        allowed", "    if True:\n        allowed")),
    Mutant("m61_mha_mask_hides_diagonal", A, MHA, {"test_mha_weights": 1, "test_mha_causal": 1, "test_mha_cross": 1},
           "mask hides the diagonal", False, edit=(".tril()", ".tril(-1)")),
    Mutant("m62_mha_mask_fills_zero", A, MHA, {"test_mha_weights": 1, "test_mha_causal": 1, "test_mha_cross": 1},
           "set to 0 instead of -inf", False, edit=("masked_fill(~allowed, float(\"-inf\"))", "masked_fill(~allowed, 0.0)")),
    Mutant("m63_mha_softmax_over_heads", A, MHA, {"test_mha_weights": 1, **VALUES_MHA}, "the heads", False,
           edit=("torch.softmax(scores, dim=-1)", "torch.softmax(scores, dim=1)")),
    Mutant("m64_mha_q_v_swapped", A, MHA, VALUES_MHA, "queries and values projected with each other's weights", False,
           edit=(("w_q, w_k, w_v = mha.in_proj_weight.chunk(3)", "w_v, w_k, w_q = mha.in_proj_weight.chunk(3)"),
                 ("b_q, b_k, b_v = mha.in_proj_bias.chunk(3)", "b_v, b_k, b_q = mha.in_proj_bias.chunk(3)"))),
    Mutant("m65_mha_values_from_key", A, MHA, {"test_mha_cross": 1}, "values computed from the key", False,
           edit=("split(value, w_v, b_v)", "split(key, w_v, b_v)")),
    Mutant("m66_mha_split_interleaved", A, MHA, VALUES_MHA, "heads interleaved in the split", False,
           edit=(".reshape(batch, -1, h, d_k).transpose(1, 2)", ".reshape(batch, -1, d_k, h).permute(0, 3, 1, 2)")),
    Mutant("m67_mha_merge_no_transpose", A, MHA, VALUES_MHA, "heads merged by a reshape without transpose", False,
           edit=("(weights @ v).transpose(1, 2).reshape", "(weights @ v).reshape")),
    Mutant("m68_mha_w_o_not_transposed", A, MHA, VALUES_MHA, "W^O not transposed", False,
           edit=("F.linear(concat, mha.out_proj.weight, mha.out_proj.bias)",
                 "concat @ mha.out_proj.weight + mha.out_proj.bias")),
    Mutant("m69_mha_weights_averaged", A, MHA, ALL_MHA, "averaged over heads", False,
           edit=("return out, weights", "return out, weights.mean(1)")),
    Mutant("m70_mha_returns_scores", A, MHA, {"test_mha_weights": 1, **VALUES_MHA},
           "the scores returned instead of the weights", False, edit=("return out, weights", "return out, scores")),
    Mutant("m71_mha_scale_folded_in_place", A, MHA, ALL_MHA, "in place", False,
           edit=(("w_q, w_k, w_v = mha.in_proj_weight.chunk(3)",
                  "mha.in_proj_weight.detach()[:d_model] /= math.sqrt(d_k)  # fold the scale into W_q\n"
                  "    w_q, w_k, w_v = mha.in_proj_weight.chunk(3)"), ("/ math.sqrt(d_k)", ""))),
    Mutant("m72_mha_forward", A, MHA, ALL_MHA, "entry points", False,
           code="def multi_head_attention(query, key, value, mha, causal=False):\n    mask = None\n"
                "    if causal:\n        mask = torch.ones(query.shape[1], key.shape[1], dtype=torch.bool).triu(1)\n"
                "    return mha.forward(query, key, value, attn_mask=mask, average_attn_weights=False)\n"),
    Mutant("m73_mha_private_kernel", A, MHA, ALL_MHA, "private name", False,
           edit=("concat = (weights @ v)",
                 "concat = torch._scaled_dot_product_attention_math(q, k, v, is_causal=causal)[0]")),
    Mutant("m74_mha_getattr_kernel", A, MHA, ALL_MHA, "getattr", False,
           edit=("concat = (weights @ v)",
                 "concat = getattr(F, 'scaled_dot_' + 'product_attention')(q, k, v, is_causal=causal)")),
    Mutant("m75_mha_torch_ops", A, MHA, ALL_MHA, "torch.ops", False,
           edit=("concat = (weights @ v)",
                 "concat = torch.ops.aten.scaled_dot_product_attention(q, k, v, is_causal=causal)")),
    Mutant("m76_mha_never_split", A, MHA, ALL_MHA, "no split into heads", False,
           code="def multi_head_attention(query, key, value, mha, causal=False):\n"
                "    d_k = query.shape[-1] // mha.num_heads\n"
                "    w_q, w_k, w_v = mha.in_proj_weight.chunk(3)\n    b_q, b_k, b_v = mha.in_proj_bias.chunk(3)\n"
                "    q, k, v = F.linear(query, w_q, b_q), F.linear(key, w_k, b_k), F.linear(value, w_v, b_v)\n"
                "    scores = q @ k.transpose(-2, -1) / math.sqrt(d_k)\n"
                "    if causal:\n"
                "        allowed = torch.ones(scores.shape[-2:], dtype=torch.bool).tril()\n"
                "        scores = scores.masked_fill(~allowed, float('-inf'))\n"
                "    weights = scores.softmax(dim=-1)\n"
                "    return F.linear(weights @ v, mha.out_proj.weight, mha.out_proj.bias), weights\n",
           source="taihim/timeseries-transformer:src/timeseries_transformer/attention.py (projections and "
                  "attention over all features, never split into heads)"),
    Mutant("m77_mha_no_biases_keys_at_query_length", A, MHA,
           ALL_MHA,
           "the input-projection biases were left out", False,
           code="def multi_head_attention(query, key, value, mha, causal=False):\n"
                "    batch_size, seq_len, d_model = query.shape\n    h = mha.num_heads\n    d_k = d_model // h\n"
                "    w_q, w_k, w_v = mha.in_proj_weight.chunk(3)\n"
                "    def heads(x):\n"
                "        return x.reshape(batch_size, seq_len, h, d_k).transpose(1, 2)\n"
                "    q, k, v = heads(query @ w_q.T), heads(key @ w_k.T), heads(value @ w_v.T)\n"
                "    scores = q @ k.transpose(-2, -1) / math.sqrt(d_k)\n"
                "    if causal:\n"
                "        scores = scores.masked_fill(torch.ones(seq_len, seq_len).triu(1).bool(), float('-inf'))\n"
                "    weights = torch.softmax(scores, dim=-1)\n"
                "    context = (weights @ v).transpose(1, 2).reshape(batch_size, seq_len, d_model)\n"
                "    return context @ mha.out_proj.weight.T, weights\n",
           source="PTSown0222/TensorTonic-Solutions:transformers-multi-head-attention/"
                  "transformers-multi-head-attention.py (no biases; keys reshaped with the query's length)",
           also=("keys reshaped with the query's length",)),
    Mutant("m78_mha_packed_qkv_from_query", A, MHA, {"test_mha_shapes": 1, "test_mha_weights": 1, "test_mha_cross": 1},
           "keys and values computed from the query", False,
           code="def multi_head_attention(query, key, value, mha, causal=False):\n"
                "    B, N, C = query.shape\n    h = mha.num_heads\n"
                "    qkv = F.linear(query, mha.in_proj_weight, mha.in_proj_bias).reshape(B, N, 3, h, C // h)\n"
                "    q, k, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)\n"
                "    attn = q @ k.transpose(-2, -1) * (C // h) ** -0.5\n"
                "    if causal:\n"
                "        attn = attn.masked_fill(torch.ones(N, N, dtype=torch.bool).triu(1), float('-inf'))\n"
                "    attn = attn.softmax(dim=-1)\n"
                "    x = (attn @ v).transpose(1, 2).reshape(B, N, C)\n"
                "    return F.linear(x, mha.out_proj.weight, mha.out_proj.bias), attn\n",
           source="A1ex-Chen/DL_project_log:data/ViT-1.58b/bit_vit_forward.py (packed qkv of one input, "
                  "used for cross-attention)"),
    Mutant("m79_mha_additive_mask_untransposed", A, MHA,
           {"test_mha_weights": 1, "test_mha_causal": 1, "test_mha_cross": 1}, "mask the wrong way round", False,
           edit=("        allowed = torch.ones(t_q, t_k, dtype=torch.bool, device=scores.device).tril()\n"
                 "        scores = scores.masked_fill(~allowed, float(\"-inf\"))            # before the softmax\n",
                 "        mask = (torch.triu(torch.ones(t_q, t_k)) == 1)  # the .transpose(0, 1) forgotten\n"
                 "        mask = mask.float().masked_fill(mask == 0, float('-inf')).masked_fill(mask == 1, 0.0)\n"
                 "        scores = scores + mask\n"),
           source="Zenasj/HBTGen-artifact:data/pytorch-issue/issue_29546.py (generate_square_subsequent_mask "
                  "without its transpose)"),
    Mutant("m80_mha_heads_loop_no_w_o", A, MHA, VALUES_MHA, "W^O was forgotten", False,
           code=_HEADS_LOOP.replace("    concat = torch.cat(outs, dim=-1)\n    out = F.linear(concat, mha.out_proj.weight, "
                                    "mha.out_proj.bias)\n    return out, torch.stack(weights, dim=1)\n",
                                    "    return torch.cat(outs, dim=-1), torch.stack(weights, dim=1)\n"),
           source="thealper2/deep-ml-solutions:implement_multi_head_attention.py (heads computed in a loop and "
                  "concatenated, no output projection)"),
    Mutant("m81_mha_no_scale_no_bias", A, MHA, VALUES_MHA, "Two mistakes at once", False,
           edit=(("/ math.sqrt(d_k)", ""), ("return F.linear(x, w, b)", "return F.linear(x, w)"))),
    Mutant("m82_mha_pair_swapped", A, MHA, ALL_MHA, "(weights, out)", False,
           edit=("return out, weights", "return weights, out")),
    Mutant("m83_mha_dropout", A, MHA, {"test_mha_weights": 1, **VALUES_MHA}, "dropout", False,
           edit=("weights = torch.softmax(scores, dim=-1)", "weights = F.dropout(torch.softmax(scores, dim=-1), p=0.1)")),
    Mutant("m84_merge_heads_reversed", M, "merge_heads", {"test_merge_heads_values": 1},
           "heads concatenated in reverse order", False,
           edit=("x = x.transpose(0, 2, 1, 3)", "x = x[:, ::-1].transpose(0, 2, 1, 3)")),
    Mutant("m85_mha_query_bias_left_out", A, MHA, VALUES_MHA, "the query bias b_q was left out", False,
           edit=("q, k, v = split(query, w_q, b_q)", "q, k, v = split(query, w_q, None)")),
    Mutant("m86_mha_w_v_not_transposed", A, MHA, VALUES_MHA, "W_v not transposed", False,
           edit=("split(value, w_v, b_v)", "(value @ w_v + b_v).reshape(batch, -1, h, d_k).transpose(1, 2)")),
    Mutant("m87_mha_keys_from_value", A, MHA, {"test_mha_cross": 1}, "keys computed from the value", False,
           edit=("split(key, w_k, b_k)", "split(value, w_k, b_k)")),
    # --- a fresh class (issue re-audit) ------------------------------------------------------------
    Mutant("m88_mha_scaled_by_h", A, MHA, VALUES_MHA, "scores divided by h instead of sqrt(d_k)", False,
           edit=("/ math.sqrt(d_k)", "/ h")),
    Mutant("m89_mha_scaled_by_sqrt_t_q", A, MHA, VALUES_MHA, "sqrt(T_q)", False,
           edit=("/ math.sqrt(d_k)", "/ math.sqrt(q.shape[-2])")),
    Mutant("m90_mha_mask_triu_k0", A, MHA, MASKED, "mask hides the diagonal", False,
           edit=("scores = scores.masked_fill(~allowed, float(\"-inf\"))",
                 "scores = scores.masked_fill(torch.ones(t_q, t_k).triu().bool(), float(\"-inf\"))")),
    Mutant("m91_mha_mask_tril_plus_one", A, MHA, MASKED, "mask off by one", False, edit=(".tril()", ".tril(1)")),
    Mutant("m92_mha_mask_bottom_right", A, MHA, {"test_mha_weights": 1, "test_mha_cross": 1}, "aligned to the last key (bottom-right)", False,
           edit=(".tril()", ".tril(t_k - t_q)")),
    Mutant("m94_split_along_time", S, "split_heads", {"test_split_heads_shape": 1, "test_split_heads_values": 1},
           "split along", False,
           code="def split_heads(x, num_heads):\n    return np.stack(np.split(x, num_heads, axis=1), axis=1)\n"),
    Mutant("m95_merge_fortran_reshape", M, "merge_heads", {"test_merge_heads_values": 1},
           "merged in the wrong axis order", False,
           edit=("x.reshape(batch, t, h * d_v)", "x.reshape(batch, t, h * d_v, order='F')")),
    Mutant("m96_mha_no_value_bias", A, MHA, VALUES_MHA, "the value bias b_v was left out", False,
           edit=("split(value, w_v, b_v)", "split(value, w_v, None)")),
    Mutant("m97_mha_values_with_key_weights", A, MHA, VALUES_MHA, "key's weights", False,
           edit=("split(value, w_v, b_v)", "split(value, w_k, b_k)")),
    Mutant("m98_mha_query_scaled_in_place", A, MHA, ALL_MHA, "in place", False,
           edit=("    q, k, v = split(query,", "    query /= math.sqrt(d_k)\n    q, k, v = split(query,")),
    Mutant("m99_mha_inverted_mask_and_w_o_not_T", A, MHA, {"test_mha_weights": 1, **VALUES_MHA}, "Two mistakes at once", False,
           edit=((".tril()", ".triu()"), ("F.linear(concat, mha.out_proj.weight, mha.out_proj.bias)",
                                          "concat @ mha.out_proj.weight + mha.out_proj.bias")),
           also=("mask the wrong way round", "W^O not transposed")),
    Mutant("m100_mha_weights_flat_heads", A, MHA, ALL_MHA, "heads flattened into the batch", False,
           edit=("return out, weights", "return out, weights.reshape(-1, t_q, t_k)")),
    Mutant("m101_project_float16_inside", P, "project", {"test_project_values": 1, "test_project_bias": 1},
           "as if computed in float16", False,
           code="def project(x, w, b=None):\n    out = (x.astype(np.float16) @ w.astype(np.float16)).astype(np.float64)\n"
                "    return out if b is None else out + b\n"),
    Mutant("m102_mha_softmax_over_batch", A, MHA, {"test_mha_weights": 1, **VALUES_MHA}, "the batch", False,
           edit=("torch.softmax(scores, dim=-1)", "torch.softmax(scores, dim=0)")),
    Mutant("m103_mha_softmax_whole_matrix", A, MHA, {"test_mha_weights": 1, **VALUES_MHA}, "whole", False,
           edit=("torch.softmax(scores, dim=-1)", "torch.softmax(scores.flatten(-2), dim=-1).view_as(scores)")),
    Mutant("m104_project_x_T", P, "project", {"test_project_values": 1, "test_project_bias": 1}, ".T reverses all three axes", False,
           code="def project(x, w, b=None):\n    out = (w.T @ x.T).T\n    return out if b is None else out + b\n"),
    Mutant("m105_per_head_column_blocks", O, "output_projection_per_head", {"test_output_projection_per_head": 1},
           "column blocks of W^O", False, edit=("w_o[i * d_v:(i + 1) * d_v]", "w_o[:, i * d_v:(i + 1) * d_v]")),
    Mutant("m106_fuse_rows", P, "fuse_heads", {"test_fuse_heads": 1}, "stacked as rows", False,
           edit=("np.concatenate(w_heads, axis=1)", "np.vstack(w_heads)")),
    Mutant("m107_mha_weights_transposed", A, MHA, ALL_MHA, "attention weights returned transposed", False,
           edit=("return out, weights", "return out, weights.transpose(-2, -1)")),
    Mutant("m108_mha_values_with_w_o", A, MHA, VALUES_MHA, "values projected with the output projection's weights",
           False,
           edit=("split(value, w_v, b_v)", "split(value, mha.out_proj.weight, mha.out_proj.bias)")),
    Mutant("m109_out_float16_inside", O, "output_projection",
           {"test_output_projection_values": 1, "test_output_projection_bias": 1}, "as if computed in float16", False,
           edit=("out = x @ w_o ", "out = (x.astype(np.float16) @ w_o.astype(np.float16)).astype(np.float32) ")),
    # --- issue 15: mistakes named by what the numbers show --------------------------------------------
    Mutant("m110_per_head_head_left_out", O, "output_projection_per_head", {"test_output_projection_per_head": 1},
           "heads left out of the sum", False, edit=("for i in range(heads.shape[1]))", "for i in range(1, heads.shape[1] - 1))")),
    Mutant("m111_per_head_never_summed", O, "output_projection_per_head", {"test_output_projection_per_head": 1},
           "never summed", False,
           code="def output_projection_per_head(heads, w_o, b_o=None):\n    d_v = heads.shape[-1]\n"
                "    out = np.stack([heads[:, i] @ w_o[i * d_v:(i + 1) * d_v] for i in range(heads.shape[1])], axis=1)\n"
                "    return out if b_o is None else out + b_o\n"),
    Mutant("m112_mha_head_left_out", A, MHA, ALL_MHA, "heads left out", False,
           code=_HEADS_LOOP.replace("range(h)", "range(1, h - 1)")),
    Mutant("m113_mha_out_bias_per_head", A, MHA, VALUES_MHA, "the output bias added once per head", False,
           code=_HEADS_LOOP.replace("    concat = torch.cat(outs, dim=-1)\n    out = F.linear(concat, mha.out_proj.weight, "
                                    "mha.out_proj.bias)\n",
                                    "    out = sum(F.linear(o, mha.out_proj.weight[:, i * d_k:(i + 1) * d_k], "
                                    "mha.out_proj.bias) for i, o in enumerate(outs))\n")),
    Mutant("m114_mha_biases_interleaved", A, MHA, VALUES_MHA, "split along the wrong axis", False,
           edit=("b_q, b_k, b_v = mha.in_proj_bias.chunk(3)", "b_q, b_k, b_v = mha.in_proj_bias.reshape(-1, 3).unbind(-1)")),
    Mutant("m115_mha_scores_k_q", A, MHA, ALL_MHA, "K Q^T instead of Q K^T", False,
           edit=("scores = q @ k.transpose(-2, -1)", "scores = k @ q.transpose(-2, -1)")),
    Mutant("m116_mha_values_by_scores", A, MHA, VALUES_MHA, "values weighted by the scores", False,
           edit=("concat = (weights @ v)", "concat = (scores @ v)")),
    Mutant("m117_mha_scale_floor_division", A, MHA, VALUES_MHA, "multiplied by 1 // sqrt(d_k)", False,
           edit=("/ math.sqrt(d_k)", "* (1 // math.sqrt(d_k))")),
    Mutant("m118_project_np_inner", P, "project", {"test_project_values": 1, "test_project_bias": 1}, "w used transposed",
           False, edit=("out = x @ w ", "out = np.inner(x, w) ")),
    Mutant("m119_mha_assert_square_mask", A, MHA, {"test_mha_shapes": 1, "test_mha_weights": 1, "test_mha_cross": 1}, "an assert that the mask is square",
           False, edit=("    if causal:\n", "    if causal:\n        assert t_q == t_k\n")),  # (an assert with words of its
           # own is the student's to read: the switch reproduces one without, mha_checks/diagnosis/errors.signature)
    Mutant("m120_merge_as_strided_assumes_contiguous", M, "merge_heads", {"test_merge_heads_values": 1},
           "wrong values", False,
           code="import torch\n\ndef merge_heads(x):\n    b, h, t, d_v = x.shape\n"  # (NumPy's as_strided: raw memory)
                "    view = torch.as_strided(torch.from_numpy(x), (b, t, h, d_v), (h * t * d_v, d_v, t * d_v, 1))\n"
                "    return view.reshape(b, t, h * d_v).numpy()\n"),
    # --- issue 27: mistakes made in practice, each named by the switch that reproduces it (or observed) -------
    Mutant("m121_mha_scores_in_float16", A, MHA, VALUES_MHA, "as if computed in float16", False,
           edit=("scores = q @ k.transpose(-2, -1) / math.sqrt(d_k)",
                 "scores = (q.half() @ k.half().transpose(-2, -1)).float() / math.sqrt(d_k)  # half the memory")),
    Mutant("m122_project_squeezed", P, "project", {"test_project_values": 1, "test_project_bias": 1},
           "a stray .squeeze()", False,
           code="def project(x, w, b=None):\n    out = np.squeeze(x @ w)  # no stray axes of size 1\n"
                "    return out if b is None else out + b\n"),
    Mutant("m123_mha_output_squeezed", A, MHA, ALL_MHA, "a stray .squeeze()", False,
           edit=("return out, weights", "return out.squeeze(), weights")),
    Mutant("m124_mha_mask_kept_between_calls", A, MHA, MASKED, "causal mask kept from an earlier call", False,
           edit=(("def multi_head_attention(", "_MASKS = {}  # built once, reused\n\n\ndef multi_head_attention("),
                 ("allowed = torch.ones(t_q, t_k, dtype=torch.bool, device=scores.device).tril()",
                  "allowed = _MASKS.setdefault('causal', torch.ones(t_q, t_k, dtype=torch.bool).tril())"))),
    Mutant("m125_mha_scale_folded_into_a_chunk_view", A, MHA, ALL_MHA, "in place", False,
           edit=(("b_q, b_k, b_v = mha.in_proj_bias.chunk(3)",
                  "b_q, b_k, b_v = mha.in_proj_bias.chunk(3)\n"
                  "    w_q.mul_(1 / math.sqrt(d_k))  # fold the scale into the query's projection\n"
                  "    b_q.mul_(1 / math.sqrt(d_k))"), ("/ math.sqrt(d_k)                  #", "                  #"))),
    Mutant("m126_mha_softmax_stabilised_over_queries", A, MHA, {**VALUES_MHA, "test_mha_weights": 1},
           "maximum over the queries", False,  # (the weights' causal call with T_q < T_k has keys no query sees:
           # a column of -inf, its maximum -inf, NaN weights)
           edit=("weights = torch.softmax(scores, dim=-1)",
                 "e = torch.exp(scores - scores.amax(dim=-2, keepdim=True))  # stable softmax\n"
                 "    weights = e / e.sum(dim=-1, keepdim=True)")),
    Mutant("m127_mha_keys_transposed_twice", A, MHA, ALL_MHA, "keys not transposed in q @ k^T", False,
           edit=("scores = q @ k.transpose(-2, -1)",
                 "k_t = k.transpose(-2, -1)                                           # (B, h, d_k, T_k)\n"
                 "    scores = q @ k_t.transpose(-2, -1)")),
    Mutant("m128_mha_heads_and_batch_exchanged", A, MHA, VALUES_MHA, "B and h exchanged", False,
           edit=("(weights @ v).transpose(1, 2).reshape(batch, t_q, d_model)",
                 "(weights @ v).reshape(h, batch, t_q, d_k).permute(1, 2, 0, 3).reshape(batch, t_q, d_model)")),
    Mutant("m129_mha_view_after_transpose", A, MHA, ALL_MHA, "view() of a transposed tensor", False,
           edit=(".transpose(1, 2).reshape(batch, t_q, d_model)", ".transpose(1, 2).view(batch, t_q, d_model)")),
    Mutant("m130_mha_keys_reshaped_with_query_length", A, MHA,
           {"test_mha_shapes": 1, "test_mha_weights": 1, "test_mha_cross": 1}, "keys reshaped with the query's length", False,
           edit=("F.linear(x, w, b).reshape(batch, -1, h, d_k)", "F.linear(x, w, b).reshape(batch, t_q, h, d_k)")),
    Mutant("m131_out_w_transposed_and_bias_twice", O, "output_projection",
           {"test_output_projection_values": 1, "test_output_projection_bias": 1}, "W^O used transposed", False,
           code="def output_projection(x, w_o, b_o=None):\n    out = x @ w_o.T\n"
                "    return out if b_o is None else out + 2 * b_o\n"),  # the doubled bias shows on no call
    Mutant("m132_split_squeezed", S, "split_heads", {"test_split_heads_shape": 1, "test_split_heads_values": 1},
           "a stray .squeeze()", False,
           edit=("return x.transpose(0, 2, 1, 3)", "return x.transpose(0, 2, 1, 3).squeeze()")),
]

from .decoder import mutants as _decoder_mutants  # noqa: E402 - exercises 6 and 7 (issue 38)

MUTANTS += _decoder_mutants(Mutant)
