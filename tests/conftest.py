"""Fixtures shared by the whole test tree (a folder's own fixtures are in its conftest.py).

Where the AgentClinic files are (``SHARED_DATA``, with its lookup order) and the markers
that skip a test without them are importable, in :mod:`clinenv.testing.data`; so are the
other helpers tests import (:mod:`clinenv.testing`). Here: the data fixtures
(:func:`shared_data_dir`, :func:`dataset_kwargs`, :func:`workdir`), the fake-server
fixtures (:func:`fake_server`, ``server`` and ``model``) and the leak filters of the core
suite (:func:`pytest_collection_modifyitems`).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from clinenv.testing.data import (
    MEDQA_FILE,
    NEJM_FILE,
    SHARED_DATA,
    skip_without_shared_data,
)


@pytest.fixture
def shared_data_dir(monkeypatch, tmp_path) -> Path:
    """CLINENV_DATA_DIR pointed at the shared AgentClinic files; an empty user cache.

    Skips the test when the MedQA or NEJM file is absent from ``SHARED_DATA``.
    """
    skip_without_shared_data(MEDQA_FILE, NEJM_FILE)
    monkeypatch.setenv("CLINENV_DATA_DIR", str(SHARED_DATA))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return SHARED_DATA


# ------------------------------------------------------------------- fake servers
@pytest.fixture
def fake_server():
    """A started :class:`~clinenv.testing.fake_server.FakeChatServer` (responder
    ``"ok"``, no delay), stopped after."""
    from clinenv.testing.fake_server import FakeChatServer

    with FakeChatServer() as server:
        yield server


@pytest.fixture(name="server")
def clinic_server() -> Iterator:
    """Fixture ``server``: a started :class:`~clinenv.testing.fake_server.FakeChatServer`
    on 127.0.0.1 answering with :func:`clinenv.testing.clinic.clinic_responder` (judge
    reply ``"Yes"``, no delay); stopped after the test."""
    from clinenv.testing.clinic import clinic_responder
    from clinenv.testing.fake_server import FakeChatServer

    with FakeChatServer(clinic_responder()) as srv:
        yield srv


@pytest.fixture(name="model")
def clinic_model(server) -> Iterator:
    """Fixture ``model``: an :class:`~clinenv.llm.openai_backend.OpenAIChatModel` named
    ``"fake-model"`` on ``server`` without retries (an injected fault reaches the caller
    at once); closed after."""
    from clinenv.llm.openai_backend import OpenAIChatModel

    chat = OpenAIChatModel("fake-model", base_url=server.base_url, max_retries=0)
    yield chat
    chat.close()


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
#: The suites of heavy extras (the files that .ci/run runs in their own venvs, and
#: tests/browser) run third-party code whose leaks are not ours to fix, and are left out;
#: tests/integrations' other files (clinenv.integrations' own logic) are core.
LEAK_FILTERS = ("error::ResourceWarning", "error::pytest.PytestUnraisableExceptionWarning")
_TESTS = Path(__file__).resolve().parent
_EXTRA_FOLDERS = frozenset({"browser"})
_EXTRA_FILES = frozenset({
    "distributed/test_ray.py", "integrations/test_export_templates.py",
    "integrations/test_openenv.py", "integrations/test_openenv_trl.py",
    "integrations/test_skyrl.py", "integrations/test_train_grpo.py",
    "integrations/test_trl.py", "integrations/test_trl_per_turn.py",
    "integrations/test_verifiers.py", "integrations/test_verl.py"})


def _extra_suite(path: Path) -> bool:
    try:
        parts = path.resolve().relative_to(_TESTS).parts
    except ValueError:
        return False
    return bool(parts) and (parts[0] in _EXTRA_FOLDERS or "/".join(parts) in _EXTRA_FILES)


def pytest_collection_modifyitems(config, items):
    for item in items:
        if not _extra_suite(item.path):
            for spec in LEAK_FILTERS:
                item.add_marker(pytest.mark.filterwarnings(spec))
