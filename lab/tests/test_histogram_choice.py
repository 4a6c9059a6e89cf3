"""Which multi-get size the report's histograms show: seed 000 §5.3 (Figure 26) shows 6 keys."""

from memrelay_lab.report._percentiles_section import histogram_multiget


def test_the_seeds_six_keys_when_run():
    # gets-multigets.toml: the middle of 1..21 would be 9; the seed's figure is of 6 keys
    assert histogram_multiget([1, 3, 6, 9, 12, 15, 18, 21]) == 6


def test_the_middle_size_otherwise():
    assert histogram_multiget([9, 18, 27, 54, 81]) == 27
    assert histogram_multiget([1, 4]) == 1
