"""The NEJM ``physical_exams`` splitter, one hand-written input per shape."""

from __future__ import annotations

import pytest

from clinenv.datasets.nejm_split import FALLBACK_NAME, is_refusal, split_test_findings

LABS = {"Hemoglobin": "9.1 g/dL", "Platelet count": "120,000/mm3", "Blood culture": "Negative"}

SHAPES = {
    "dash bullets on lines": (
        "- Hemoglobin: 9.1 g/dL\n- Platelet count: 120,000/mm3\n- Blood culture: Negative",
        LABS,
    ),
    "inline dash bullets": (
        "- Hemoglobin: 9.1 g/dL - Platelet count: 120,000/mm3 - Blood culture: Negative",
        LABS,
    ),
    "first item without dash": (
        "Hemoglobin: 9.1 g/dL - Platelet count: 120,000/mm3 - Blood culture: Negative.",
        LABS,
    ),
    "name-result lines": (
        "Hemoglobin: 9.1 g/dL\r\nPlatelet count: 120,000/mm3\r\n\r\nBlood culture: Negative",
        LABS,
    ),
    "markdown bullets": (
        "* **Hemoglobin**: 9.1 g/dL\n* **Platelet count**: 120,000/mm3\n"
        "* **Blood culture**: Negative",
        LABS,
    ),
    "numbered inline": (
        "1. Chest CT: Bilateral hilar nodes. 2. Sputum culture: No growth. "
        "3. Serum ACE level: 85 U/L (reference range, 8 to 52).",
        {"Chest CT": "Bilateral hilar nodes", "Sputum culture": "No growth",
         "Serum ACE level": "85 U/L (reference range, 8 to 52)"},
    ),
    "numbered lines": (
        "1) Chest CT: Bilateral hilar nodes\n2) Sputum culture: No growth",
        {"Chest CT": "Bilateral hilar nodes", "Sputum culture": "No growth"},
    ),
    "inline sentences": (
        "Chest radiograph: Right lower lobe consolidation. Blood culture: Streptococcus "
        "pneumoniae. Procalcitonin: 4.2 ng/mL.",
        {"Chest radiograph": "Right lower lobe consolidation",
         "Blood culture": "Streptococcus pneumoniae", "Procalcitonin": "4.2 ng/mL"},
    ),
    "sentence continuing a value": (
        "Chest CT: Ground-glass opacities. Septal thickening, a crazy-paving pattern. "
        "- Biopsy: Noncaseating granulomas",
        {"Chest CT": "Ground-glass opacities. Septal thickening, a crazy-paving pattern",
         "Biopsy": "Noncaseating granulomas"},
    ),
    "preamble then numbered": (
        "The information extracted from the case report relevant to instrument readings and "
        "test results includes: 1. ECG: ST elevation in leads V1 to V4. 2. Troponin I: 12 "
        "ng/mL.",
        {"ECG": "ST elevation in leads V1 to V4", "Troponin I": "12 ng/mL"},
    ),
    "preamble then inline item": (
        "Here are the test results: Hemoglobin: 9.1 g/dL - Blood culture: Negative",
        {"Hemoglobin": "9.1 g/dL", "Blood culture": "Negative"},
    ),
    "group headers with unnamed bullets": (
        "Laboratory studies showed: - Leukocytosis - Elevated lactate Imaging: - Abdominal "
        "CT: Free air under the diaphragm",
        {"Laboratory studies": "Leukocytosis; Elevated lactate",
         "Imaging": {"Abdominal CT": "Free air under the diaphragm"}},
    ),
    "header after a named value": (
        "Labs: - Sodium: 128 mmol/L Urinalysis: - Protein: 3+ - Casts: None",
        {"Labs": {"Sodium": "128 mmol/L"}, "Urinalysis": {"Protein": "3+", "Casts": "None"}},
    ),
    "header with named sub-bullets is one nested record": (
        "Urinalysis: - Hematuria: Present - Pyuria: Present",
        {"Urinalysis": {"Hematuria": "Present", "Pyuria": "Present"}},
    ),
    "named sub-bullets on lines; a plain line after them ends the group": (
        "Urinalysis:\n- Hematuria: Present\n- Pyuria: Present\nChest CT: Normal\n"
        "Smear:\n- Schistocytes\nNo blasts seen",
        {"Urinalysis": {"Hematuria": "Present", "Pyuria": "Present"}, "Chest CT": "Normal",
         "Smear": "Schistocytes", FALLBACK_NAME: "No blasts seen"},
    ),
    "plain lines under a header stay in the group": (
        "Laboratory studies:\nHemoglobin: 9.1 g/dL\nPlatelet count: 120,000/mm3",
        {"Laboratory studies": {"Hemoglobin": "9.1 g/dL", "Platelet count": "120,000/mm3"}},
    ),
    "numbered sub-items under a header": (
        "Complete blood count: 1. Hemoglobin: 9.1 g/dL 2. Platelet count: 120,000/mm3",
        {"Complete blood count": {"Hemoglobin": "9.1 g/dL", "Platelet count": "120,000/mm3"}},
    ),
    "groups on lines": (
        "Laboratory studies:\n- Hemoglobin: 9.1 g/dL\n- Leukocytosis\nImaging:\n- Chest CT: Normal",
        {"Laboratory studies": {"Hemoglobin": "9.1 g/dL", FALLBACK_NAME: "Leukocytosis"},
         "Imaging": {"Chest CT": "Normal"}},
    ),
    "mixed group keeps unnamed bullets under the fallback name": (
        "Laboratory results: - Eosinophilia - Serum IgE: 900 IU/mL - Mild anemia",
        {"Laboratory results": {FALLBACK_NAME: "Eosinophilia; Mild anemia",
                                "Serum IgE": "900 IU/mL"}},
    ),
    "preamble header groups nothing": (
        "Laboratory testing results for the patient are as follows: - CD4 cell count: 494 "
        "- HIV viral load: 450 copies/mL",
        {"CD4 cell count": "494", "HIV viral load": "450 copies/mL"},
    ),
    "duplicate names inside a group": (
        "Blood cultures: - Culture: Negative - Culture: Positive",
        {"Blood cultures": {"Culture": "Negative", "Culture (2)": "Positive"}},
    ),
    "unnamed leading finding": (
        "Pronounced eosinophilia - Chest CT: Peripheral consolidations",
        {FALLBACK_NAME: "Pronounced eosinophilia", "Chest CT": "Peripheral consolidations"},
    ),
    "colon inside brackets and between digits": (
        "- HIV viral load: 450 copies/mL (reference range: <20) - ANA titer: 1:640",
        {"HIV viral load": "450 copies/mL (reference range: <20)", "ANA titer": "1:640"},
    ),
    "duplicate names": (
        "- Blood culture: Negative - Blood culture: Positive for S. aureus - blood culture: "
        "Pending",
        {"Blood culture": "Negative", "Blood culture (2)": "Positive for S. aureus",
         "blood culture (3)": "Pending"},
    ),
    "prose": (
        "The chest radiograph showed a right lower lobe consolidation and the blood cultures "
        "grew Streptococcus pneumoniae.",
        {FALLBACK_NAME: "The chest radiograph showed a right lower lobe consolidation and "
                        "the blood cultures grew Streptococcus pneumoniae."},
    ),
}


@pytest.mark.parametrize("shape", list(SHAPES))
def test_shapes(shape):
    text, expected = SHAPES[shape]
    assert split_test_findings(text) == expected
    assert list(split_test_findings(text)) == list(expected)  # text order kept


REFUSALS = [
    "I'm sorry, but the case report does not contain any test results.",
    "I am sorry, but I cannot provide instrument readings for this case.",
    "There are no test results or instrument readings in the provided case.",
    "No specific test results are provided in the text.",
    "The provided text does not include specific instrument readings or test results. It "
    "describes the patient's symptoms and history.",
    "The information provided does not include specific instrument readings or numerical "
    "test results. Therefore, there are no instrument readings to report.",
]


@pytest.mark.parametrize("text", REFUSALS)
def test_refusals_give_nothing(text):
    assert is_refusal(text)
    assert split_test_findings(text) == {}


@pytest.mark.parametrize(
    "text",
    [
        "Chest radiograph: Normal. There were no other abnormal findings.",
        "Blood cultures grew Escherichia coli.",
        "The biopsy showed noncaseating granulomas; stains for fungi were negative.",
    ],
)
def test_findings_are_not_refusals(text):
    assert split_test_findings(text) != {}


@pytest.mark.parametrize("text", [None, "", "   \n "])
def test_empty(text):
    assert split_test_findings(text) == {}
