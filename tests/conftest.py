"""Shared fixtures and the one place that says where the AgentClinic test files are.

The files are never copied into the repository. :data:`SHARED_DATA` is, first found:

1. the folder named by ``CLINENV_TEST_DATA`` (an override for the tests alone);
2. the folder named by ``CLINENV_DATA_DIR``, the variable that runs read, so one variable
   is enough for both;
3. the sibling ``../shared/datasets/agentclinic`` of the repository.

An empty variable counts as unset. Test modules use the
:func:`shared_data_dir` fixture, or ``from conftest import SHARED_DATA`` (this works under
pytest's default ``prepend`` import mode, which puts ``tests/`` on ``sys.path``) together
with :func:`needs_shared_data` / :func:`skip_without_shared_data`, so that a test whose
data is absent skips with a message saying where it looked.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

#: Environment variable naming a folder that holds the AgentClinic files, for the tests
#: only; it wins over :data:`DATA_DIR_ENV`.
TEST_DATA_ENV = "CLINENV_TEST_DATA"
#: The data-folder variable of runs (``clinenv.datasets.resolve.ENV_VAR``); the tests read
#: it too when :data:`TEST_DATA_ENV` is unset. Named here, not imported, so that this file
#: stays importable before clinenv is.
DATA_DIR_ENV = "CLINENV_DATA_DIR"


def _shared_data() -> Path:
    for name in (TEST_DATA_ENV, DATA_DIR_ENV):
        folder = os.environ.get(name, "").strip()
        if folder:
            return Path(folder).expanduser().resolve()
    return Path(__file__).resolve().parents[2] / "shared" / "datasets" / "agentclinic"


def _data_source() -> str:
    """Where :data:`SHARED_DATA` came from, for skip messages."""
    for name in (TEST_DATA_ENV, DATA_DIR_ENV):
        if os.environ.get(name, "").strip():
            return f"${name}"
    return f"the default (neither {TEST_DATA_ENV} nor {DATA_DIR_ENV} is set)"


#: Folder of the AgentClinic files used by the tests (see the module docstring).
SHARED_DATA = _shared_data()
_DATA_SOURCE = _data_source()

MEDQA_FILE = "agentclinic_medqa.jsonl"
NEJM_FILE = "agentclinic_nejm.jsonl"


def missing_shared_data(*file_names: str) -> str | None:
    """Skip reason when a file (default: the MedQA file) is absent from :data:`SHARED_DATA`,
    else ``None``."""
    missing = [name for name in file_names or (MEDQA_FILE,)
               if not (SHARED_DATA / name).is_file()]
    if not missing:
        return None
    return (f"AgentClinic test data not found: looked for {', '.join(missing)} in "
            f"{SHARED_DATA} (from {_DATA_SOURCE}); set {DATA_DIR_ENV} (or "
            f"{TEST_DATA_ENV}, which wins for the tests) to a folder that holds them")


def needs_shared_data(*file_names: str) -> pytest.MarkDecorator:
    """``skipif`` marker for tests that read these files from :data:`SHARED_DATA`."""
    reason = missing_shared_data(*file_names)
    return pytest.mark.skipif(reason is not None, reason=reason or "")


def skip_without_shared_data(*file_names: str) -> Path:
    """Skip the running test unless the files are present; return :data:`SHARED_DATA`."""
    reason = missing_shared_data(*file_names)
    if reason is not None:
        pytest.skip(reason)
    return SHARED_DATA


@pytest.fixture
def shared_data_dir(monkeypatch, tmp_path) -> Path:
    """CLINENV_DATA_DIR pointed at the shared AgentClinic files; an empty user cache.

    Skips the test when the MedQA or NEJM file is absent from :data:`SHARED_DATA`.
    """
    skip_without_shared_data(MEDQA_FILE, NEJM_FILE)
    monkeypatch.setenv("CLINENV_DATA_DIR", str(SHARED_DATA))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return SHARED_DATA


def leaves(tree, *, strings_only: bool = False):
    """Every leaf of a JSON tree, depth first (written here, independently of clinenv's
    own tree walkers, so tests do not check the package against itself)."""
    if isinstance(tree, dict):
        for value in tree.values():
            yield from leaves(value, strings_only=strings_only)
    elif isinstance(tree, list):
        for value in tree:
            yield from leaves(value, strings_only=strings_only)
    elif not strings_only or isinstance(tree, str):
        yield tree


# ------------------------------------------------------------- synthetic source records
def _osce(objective, patient, physical, tests, diagnosis, **extra):
    record = {"Objective_for_Doctor": objective, "Patient_Actor": patient,
              "Physical_Examination_Findings": physical, "Correct_Diagnosis": diagnosis,
              **extra}
    if tests is not None:
        record["Test_Results"] = tests
    return {"OSCE_Examination": record}


def _nejm(question, patient_info, physical_exams, options, correct, **extra):
    answers = [{"text": text, "correct": i == correct} for i, text in enumerate(options)]
    return {"question": question, "patient_info": patient_info,
            "physical_exams": physical_exams, "answers": answers, **extra}


#: Four hand-written records in AgentClinic's OSCE schema (MedQA, MedQA_Ext, MIMIC-IV):
#: nested test groups, a "Pending" leaf, a list and a bool leaf, non-ASCII units, an
#: unknown key, and a record without Test_Results (B19).
SYNTHETIC_OSCE = [
    _osce("Evaluate the patient with fever and flank pain.",
          {"Demographics": "31-year-old woman", "History": "Two days of fever, chills and "
           "right flank pain; burning on urination for a week.",
           "Symptoms": {"Primary_Symptom": "Right flank pain",
                        "Secondary_Symptoms": ["Fever", "Dysuria", "Nausea"]}},
          {"Vital_Signs": {"Temperature": "39.4 °C (102.9 °F)", "Heart_Rate": "112 bpm",
                           "Blood_Pressure": "118/72 mmHg"},
           "Abdominal_Examination": "Right costovertebral angle tenderness."},
          {"Urinalysis": {"Leukocyte_Esterase": "Positive", "Nitrites": "Positive",
                          "White_Cells": "> 50 /hpf"},
           "Blood_Tests": {"White_Blood_Cells": "17.2 × 10⁹/L", "Lactate": "1.4 mmol/L"},
           "Urine_Culture": "Pending",
           "Imaging": {"Renal_Ultrasound": {"Findings": "No hydronephrosis."}}},
          "Acute pyelonephritis", Management_and_Follow_Up="Admit for IV antibiotics."),
    _osce("Assess the child with wheeze and cough.",
          {"Demographics": "4-year-old boy", "History": "Recurrent night cough and wheeze "
           "after colds; eczema as an infant.", "Family_History": "Mother has asthma."},
          {"Vital_Signs": {"Respiratory_Rate": "32 breaths/min",
                           "Oxygen_Saturation": "95% on room air"},
           "Respiratory_Examination": {"Auscultation": "Diffuse expiratory wheeze.",
                                       "Accessory_Muscle_Use": False}},
          {"Peak_Flow": "Not performed", "Blood_Tests": {"Eosinophils": "0.6 × 10⁹/L"},
           "Allergy_Testing": ["House dust mite positive", "Cat dander positive"]},
          "Asthma"),
    _osce("Evaluate the patient with sudden chest pain.",
          {"Demographics": "58-year-old man", "History": "Crushing central chest pain for "
           "40 minutes, radiating to the left arm, with sweating."},
          {"Vital_Signs": {"Heart_Rate": "96 bpm", "Blood_Pressure": "150/90 mmHg"},
           "Cardiac_Examination": "Normal heart sounds, no murmur."},
          {"ECG": "ST elevation in leads II, III and aVF.",
           "Blood_Tests": {"Cardiac_Markers": {"Troponin_I": "2.8 ng/mL",
                                               "CK-MB": "Pending"}}},
          "Inferior ST-elevation myocardial infarction"),
    _osce("Evaluate the patient with fatigue and weight loss.",
          {"Demographics": "45-year-old woman", "History": "Six months of tiredness, "
           "craving salt, dizziness on standing and 5 kg weight loss."},
          {"Vital_Signs": {"Blood_Pressure": "92/58 mmHg lying, 78/50 mmHg standing"},
           "Skin": "Hyperpigmentation of palmar creases and buccal mucosa."},
          None, "Primary adrenal insufficiency"),
]

#: Four hand-written records in AgentClinic's NEJM schema (NEJM, NEJM_Ext): five
#: options with one correct, test text as bullets, "Name: result" lines, prose and a
#: refusal without test data, and NEJM_Ext's ``type`` labels.
SYNTHETIC_NEJM = [
    _nejm("A 62-year-old man presented with a painless, enlarging neck mass over 3 months. "
          "Fine-needle aspiration showed atypical lymphoid cells. What is the most likely "
          "diagnosis?",
          "You are a 62-year-old man with a lump on the side of your neck that has grown "
          "over three months. It does not hurt. You have had night sweats.",
          "Laboratory results: - Lactate dehydrogenase: 410 U/L - Hemoglobin: 11.9 g/dL "
          "Imaging: - CT of the neck: Conglomerate cervical lymphadenopathy",
          ["Tuberculous lymphadenitis", "Diffuse large B-cell lymphoma", "Sarcoidosis",
           "Metastatic squamous-cell carcinoma", "Cat-scratch disease"], 1,
          type=["diagnosis"], image_url="https://example.org/images/1.jpg"),
    _nejm("A 24-year-old woman presented with a pruritic rash on both shins after starting "
          "a new medication. Skin biopsy showed septal panniculitis. What is the most likely "
          "diagnosis?",
          "You are a 24-year-old woman with tender red bumps on both shins for a week. You "
          "started an oral contraceptive a month ago.",
          "Skin biopsy: Septal panniculitis without vasculitis.\nChest radiograph: No hilar "
          "adenopathy.\nAntistreptolysin O titer: 120 IU/mL",
          ["Erythema nodosum", "Cellulitis", "Erythema induratum", "Polyarteritis nodosa",
           "Lipodermatosclerosis"], 0, type=["diagnosis", "dermatology"]),
    _nejm("A 70-year-old man presented with a tremor of the right hand at rest. What is the "
          "most appropriate next step?",
          "You are a 70-year-old man whose right hand shakes when it is resting. Your "
          "writing has become small.",
          "I'm sorry, but the case report does not include instrument readings or test "
          "results that I can extract.",
          ["Start levodopa", "Brain biopsy", "Lumbar puncture", "Observation only",
           "Deep-brain stimulation"], 0, type=["treatment"]),
    _nejm("A 35-year-old man presented with fever after travel to Ghana; a blood smear was "
          "obtained. Which pathogen is most likely?",
          "You are a 35-year-old man with fevers every other day since coming back from "
          "Ghana two weeks ago. You did not take malaria tablets.",
          "1. Thin blood smear: ring forms and banana-shaped gametocytes, parasitemia 4%. "
          "2. Platelet count: 62,000 per µL. 3. Rapid antigen test: positive for HRP-2.",
          ["Plasmodium vivax", "Plasmodium falciparum", "Babesia microti",
           "Plasmodium ovale", "Trypanosoma brucei"], 1, type=["pathogen"]),
]


def write_synthetic_dataset(folder: Path, file_name: str, schema: str) -> Path:
    """Write :data:`SYNTHETIC_OSCE` (``schema="osce"``) or :data:`SYNTHETIC_NEJM`
    (``"nejm"``) as JSON Lines named ``file_name`` in ``folder``; return the path."""
    records = {"osce": SYNTHETIC_OSCE, "nejm": SYNTHETIC_NEJM}[schema]
    path = Path(folder) / file_name
    path.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in records) + "\n",
                    encoding="utf-8")
    return path


@pytest.fixture
def dataset_kwargs(monkeypatch, tmp_path):
    """A function ``dataset name -> environment kwargs`` that makes the dataset available.

    The bundled demo set needs nothing (``{}``). A registry dataset whose file is in
    :data:`SHARED_DATA` is read from there (``CLINENV_DATA_DIR`` is set, ``{}``, the
    real file, checksum verified). Otherwise the synthetic records of its schema are
    written under the registry file name into ``tmp_path`` and ``{"dataset": path}``
    is returned: an explicit file is read without the sha256 and record-count checks
    that a registry name gets (the synthetic file is not the pinned one). The user
    cache is an empty folder either way.
    """
    from clinenv.datasets.registry import DATASETS

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("CLINENV_DATA_DIR", str(SHARED_DATA))

    def kwargs(dataset: str) -> dict:
        spec = DATASETS[dataset]
        if spec.bundled or (SHARED_DATA / spec.file_name).is_file():
            return {}
        folder = tmp_path / "synthetic"
        folder.mkdir(exist_ok=True)
        return {"dataset": str(write_synthetic_dataset(folder, spec.file_name,
                                                       spec.schema))}

    return kwargs


@pytest.fixture
def workdir(tmp_path, monkeypatch) -> Path:
    """An empty working folder: ``CLINENV_DATA_DIR`` names an empty folder (so nothing
    but the bundled demo set is found), an empty user cache, the folder as the current
    directory. Test modules that need another set-up define their own ``workdir``."""
    empty = tmp_path / "no-data"
    empty.mkdir()
    monkeypatch.setenv("CLINENV_DATA_DIR", str(empty))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    return tmp_path


#: Warnings that fail a core-suite test: a file or socket left open (ResourceWarning,
#: also when raised in a finalizer, where pytest reports it as an unraisable exception).
#: The suites of heavy extras (tests/integrations, tests/browser) run third-party code
#: whose leaks are not ours to fix, and are left out.
LEAK_FILTERS = ("error::ResourceWarning", "error::pytest.PytestUnraisableExceptionWarning")
_EXTRA_SUITES = frozenset({"integrations", "browser"})


def pytest_collection_modifyitems(config, items):
    for item in items:
        if not _EXTRA_SUITES.intersection(item.path.parts):
            for spec in LEAK_FILTERS:
                item.add_marker(pytest.mark.filterwarnings(spec))
