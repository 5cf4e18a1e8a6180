"""Evaluation: the papers' metrics and paired uncertainty on run logs.

Statistics, metrics, run loading, tables, figures, sensitivity, reviewer support and
reward components; the submodules are listed in docs/evaluation.md.
"""

from clinenv.evaluation.metrics import (
    Encoder,
    HashingEncoder,
    accuracy,
    answer_status,
    correctness_matrix,
    coverage,
    embedding_similarity,
    is_unparsed,
    is_unscored,
    mean_sd,
    mean_turns_exams,
    per_repetition_accuracy,
    stratify,
)
from clinenv.evaluation.stats import (
    CorrectionRegression,
    PairedCI,
    as_correctness,
    case_means,
    correction_regression,
    holm,
    majority_correct,
    paired_bootstrap_ci,
    paired_differences,
    sign_flip_test,
    stratified_bootstrap_ci,
)
from clinenv.evaluation.summary import llm_totals, standing_records, summarize

# isort: split
from clinenv.evaluation.agreement import Agreement, cohen_kappa
from clinenv.evaluation.comparison import (
    Comparison,
    accuracy_ci,
    compare,
    comparison_table,
    pair_runs,
)
from clinenv.evaluation.components import (
    CaseLookup,
    ComponentMean,
    ComponentsError,
    RunComponents,
    component_means,
    components_table,
    line_components,
    run_components,
)
from clinenv.evaluation.plots import (
    PlotDependencyError,
    comparison_figure,
    plot_accuracy,
    plot_comparison,
    plot_correction_regression,
)
from clinenv.evaluation.reports import (
    AccuracyCell,
    Table,
    accuracy_cells,
    accuracy_table,
)
from clinenv.evaluation.review import (
    ReviewPair,
    ReviewSample,
    YieldRow,
    agreement_table,
    correct_supported_yield,
    review_pairs,
    review_table,
    yield_rows,
)
from clinenv.evaluation.reviewer_labels import (
    RATINGS,
    ReviewerLabelError,
    ReviewerLabels,
    read_reviewer_labels,
)
from clinenv.evaluation.runs import (
    Alignment,
    CaseMismatchError,
    LogSpec,
    MixedScoringError,
    Run,
    RunsError,
    align,
    load_runs,
    parse_run_spec,
    scoring_version,
)
from clinenv.evaluation.sensitivity import (
    LabelPool,
    Sensitivity,
    effect_bounds,
    label_pool,
    sensitivity,
    sensitivity_table,
    unscored_correct_difference,
)

# --- end of runs, reports, plots exports ---

__all__ = [
    # stats
    "CorrectionRegression",
    "PairedCI",
    "as_correctness",
    "case_means",
    "correction_regression",
    "holm",
    "majority_correct",
    "paired_bootstrap_ci",
    "paired_differences",
    "sign_flip_test",
    "stratified_bootstrap_ci",
    # summary
    "llm_totals",
    "standing_records",
    "summarize",
    # reward components
    "CaseLookup",
    "ComponentMean",
    "ComponentsError",
    "RunComponents",
    "component_means",
    "components_table",
    "line_components",
    "run_components",
    # sensitivity, reviewer labels, review, agreement
    "Agreement",
    "LabelPool",
    "RATINGS",
    "ReviewPair",
    "ReviewSample",
    "ReviewerLabelError",
    "ReviewerLabels",
    "Sensitivity",
    "YieldRow",
    "agreement_table",
    "cohen_kappa",
    "correct_supported_yield",
    "effect_bounds",
    "label_pool",
    "read_reviewer_labels",
    "review_pairs",
    "review_table",
    "sensitivity",
    "sensitivity_table",
    "unscored_correct_difference",
    "yield_rows",
    "Encoder",
    "HashingEncoder",
    "accuracy",
    "answer_status",
    "correctness_matrix",
    "coverage",
    "embedding_similarity",
    "is_unparsed",
    "is_unscored",
    "mean_sd",
    "mean_turns_exams",
    "per_repetition_accuracy",
    "stratify",
    "AccuracyCell",
    "Alignment",
    "CaseMismatchError",
    "Comparison",
    "MixedScoringError",
    "PlotDependencyError",
    "Run",
    "LogSpec",
    "RunsError",
    "Table",
    "accuracy_cells",
    "accuracy_ci",
    "accuracy_table",
    "align",
    "compare",
    "comparison_figure",
    "comparison_table",
    "load_runs",
    "pair_runs",
    "parse_run_spec",
    "plot_accuracy",
    "plot_comparison",
    "plot_correction_regression",
    "scoring_version",
]
