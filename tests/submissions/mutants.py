"""Wrong implementations (mutants): each is one classic mistake in one solution cell.

A mutant is the reference answer with an edit (``edit=(old, new)``, or a tuple of such pairs,
each checked to apply) or a whole replacement (``code``). ``lost`` says how many points each
grade cell of that notebook must lose (the others keep full marks), ``says`` a phrase its
feedback must contain (the mistake named in plain words), ``visible`` whether the visible tests
alone let it through (most do: that is why the grade rests on hidden tests).
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

MUTANTS = [
    # --- 1. projections ---------------------------------------------------------------------
    Mutant("m01_project_no_bias", P, "project", {"test_project_bias": 1}, "the bias was left out", True,
           edit=("out = out + b  #", "out = out  #")),
    Mutant("m02_project_w_transposed", P, "project", {"test_project_values": 1, "test_project_bias": 1},
           "w used transposed", False, edit=("out = x @ w ", "out = x @ w.T ")),
    Mutant("m03_project_bias_first", P, "project", {"test_project_bias": 1},
           "the bias added before the product", True,
           code="def project(x, w, b=None):\n    return x @ w if b is None else (x + b) @ w\n"),
    Mutant("m04_fuse_interleaved", P, "fuse_heads", {"test_fuse_heads": 1}, "heads interleaved", False,
           edit=("w = np.concatenate(w_heads, axis=1)", "w = np.stack(w_heads, axis=-1).reshape(len(w_heads[0]), -1)")),
    Mutant("m05_fuse_bias_dropped", P, "fuse_heads", {"test_fuse_heads": 1}, "the biases were not fused", True,
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
           "the output bias b_o was left out", True, edit=("out = out + b_o", "out = out")),
    Mutant("m13_out_w_transposed", O, "output_projection",
           {"test_output_projection_values": 1, "test_output_projection_bias": 1}, "W^O used transposed", False,
           edit=("out = x @ w_o ", "out = x @ w_o.T ")),
    Mutant("m14_out_bias_first", O, "output_projection", {"test_output_projection_bias": 1},
           "the bias added before W^O", True,
           code="def output_projection(x, w_o, b_o=None):\n    return x @ w_o if b_o is None else (x + b_o) @ w_o\n"),
    Mutant("m15_per_head_bias_each_head", O, "output_projection_per_head", {"test_output_projection_per_head": 1},
           "the bias added once per head", True,
           code="def output_projection_per_head(heads, w_o, b_o=None):\n    d_v = heads.shape[-1]\n"
                "    out = 0\n    for i in range(heads.shape[1]):\n"
                "        out = out + heads[:, i] @ w_o[i * d_v:(i + 1) * d_v]\n"
                "        if b_o is not None:\n            out = out + b_o\n    return out\n"),
    Mutant("m16_per_head_no_bias", O, "output_projection_per_head", {"test_output_projection_per_head": 1},
           "the output bias b_o was left out", True, edit=("out = out + b_o  #", "out = out  #")),
    Mutant("m17_per_head_averaged", O, "output_projection_per_head", {"test_output_projection_per_head": 1},
           "heads averaged instead of summed", False,
           edit=("for i in range(heads.shape[1]))", "for i in range(heads.shape[1])) / heads.shape[1]")),
    # --- 5. the assembly --------------------------------------------------------------------
    Mutant("m18_scaled_by_d_model", A, MHA, VALUES_MHA, "sqrt(d_model) instead of sqrt(d_k)", True,
           edit=("/ math.sqrt(d_k)", "/ math.sqrt(d_model)")),
    Mutant("m19_not_scaled", A, MHA, VALUES_MHA, "scores not scaled", True, edit=(" / math.sqrt(d_k)", "")),
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
    Mutant("m23_no_w_o", A, MHA, VALUES_MHA, "W^O was forgotten", True,
           edit=("out = F.linear(concat, mha.out_proj.weight, mha.out_proj.bias)", "out = concat")),
    Mutant("m24_no_output_bias", A, MHA, VALUES_MHA, "the output bias was left out", True,
           edit=("mha.out_proj.weight, mha.out_proj.bias)", "mha.out_proj.weight)")),
    Mutant("m25_no_input_bias", A, MHA, VALUES_MHA, "the input-projection biases were left out", True,
           edit=("return F.linear(x, w, b)", "return F.linear(x, w)")),
    Mutant("m26_weights_not_transposed", A, MHA, VALUES_MHA, "weights not transposed", True,
           edit=(("return F.linear(x, w, b)", "return (x @ w + b)"),
                 ("F.linear(concat, mha.out_proj.weight, mha.out_proj.bias)",
                  "concat @ mha.out_proj.weight + mha.out_proj.bias"))),
    Mutant("m27_q_k_swapped", A, MHA, VALUES_MHA, "queries and keys projected with each other's weights", True,
           edit=(("w_q, w_k, w_v = mha.in_proj_weight.chunk(3)", "w_k, w_q, w_v = mha.in_proj_weight.chunk(3)"),
                 ("b_q, b_k, b_v = mha.in_proj_bias.chunk(3)", "b_k, b_q, b_v = mha.in_proj_bias.chunk(3)"))),
    Mutant("m28_split_no_transpose", A, MHA, VALUES_MHA, "split into heads by a reshape without transpose", True,
           edit=(".reshape(batch, -1, h, d_k).transpose(1, 2)", ".reshape(batch, h, -1, d_k)")),
    Mutant("m29_merge_wrong_axis_order", A, MHA, VALUES_MHA, "heads merged in the wrong axis order", True,
           edit=("(weights @ v).transpose(1, 2).reshape", "(weights @ v).permute(0, 2, 3, 1).reshape")),
    Mutant("m30_kv_from_query", A, MHA, {"test_mha_shapes": 1, "test_mha_cross": 1},
           "keys and values computed from the query", True,
           edit=("split(key, w_k, b_k), split(value, w_v, b_v)", "split(query, w_k, b_k), split(query, w_v, b_v)")),
    Mutant("m31_mask_square", A, MHA, {"test_mha_cross": 1}, "causal mask built for T_q x T_q", True,
           edit=("torch.ones(t_q, t_k,", "torch.ones(t_q, t_q,")),
    Mutant("m32_heads_averaged", A, MHA, ALL_MHA, "heads averaged instead of concatenated", False,
           edit=("(weights @ v).transpose(1, 2).reshape(batch, t_q, d_model)", "(weights @ v).mean(1)")),
    Mutant("m33_ready_made_sdpa", A, MHA, ALL_MHA, "F.scaled_dot_product_attention", False,
           edit=("concat = (weights @ v)", "concat = F.scaled_dot_product_attention(q, k, v, is_causal=causal)")),
    Mutant("m34_ready_made_module", A, MHA, ALL_MHA, "calling the module", False,
           code="def multi_head_attention(query, key, value, mha, causal=False):\n"
                "    mask = None\n    if causal:\n"
                "        mask = torch.ones(query.shape[1], key.shape[1], dtype=torch.bool).triu(1)\n"
                "    return mha(query, key, value, attn_mask=mask, average_attn_weights=False)\n"),
]
