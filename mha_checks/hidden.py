"""PLACEHOLDER until the checks branch lands: hidden cases per grade cell."""
import numpy as np

from .cases import Case

GRADE_CELLS = {"test_project_values": "01_project", "test_project_bias": "01_project",
               "test_fuse_heads": "01_project", "test_split_heads_shape": "02_split_heads",
               "test_split_heads_values": "02_split_heads", "test_merge_heads_shape": "03_merge_heads",
               "test_merge_heads_values": "03_merge_heads", "test_output_projection_values": "04_output_projection",
               "test_output_projection_bias": "04_output_projection",
               "test_output_projection_per_head": "04_output_projection"}


def hidden_cases(grade_id: str, rng: np.random.Generator) -> list:
    n = rng.normal
    if grade_id == "test_project_values":
        return [Case("project", ("x", "w", "b"), (n(size=(2, 5, 3)), n(size=(3, 7)), None))]
    if grade_id == "test_project_bias":
        return [Case("project", ("x", "w", "b"), (n(size=(2, 5, 3)), n(size=(3, 7)), n(size=7)))]
    if grade_id == "test_fuse_heads":
        return [Case("fuse_heads", ("w_heads", "b_heads"), ([n(size=(5, 2)) for _ in range(3)],
                                                            [n(size=2) for _ in range(3)]))]
    if grade_id.startswith("test_split"):
        return [Case("split_heads", ("x", "num_heads"), (n(size=(2, 5, 12)), 3),
                     "shape" if grade_id.endswith("shape") else "values")]
    if grade_id.startswith("test_merge"):
        return [Case("merge_heads", ("x",), (n(size=(2, 3, 5, 4)),), "shape" if grade_id.endswith("shape") else "values")]
    if grade_id == "test_output_projection_values":
        return [Case("output_projection", ("x", "w_o", "b_o"), (n(size=(2, 5, 6)), n(size=(6, 4)), None))]
    if grade_id == "test_output_projection_bias":
        return [Case("output_projection", ("x", "w_o", "b_o"), (n(size=(2, 5, 6)), n(size=(6, 4)), n(size=4)))]
    if grade_id == "test_output_projection_per_head":
        return [Case("output_projection_per_head", ("heads", "w_o", "b_o"), (n(size=(2, 3, 5, 4)), n(size=(12, 7)),
                                                                             n(size=7)))]
    return []
