"""M/M/1 and M/M/m against seed 000 Tables 22-30, a brute-force birth-death chain,
numerical integration, and each other."""

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy import integrate

from memrelay_lab import MM1, MMm, UnstableSystemError, mm1, mmm

# Seed 000 section 7: rates in ops/s, times in ms. Columns are VC = 1, 4, 10, 16, 32.
# The service rate per worker is quoted with five decimals in Tables 27-30 (peak
# throughput / m); Tables 22-25 show the same total rate rounded to an integer.
SERVICE_RATE_PER_WORKER = {8: 877.67656, 16: 866.17135, 32: 592.38385, 64: 400.81152}
MM1_TABLE_WORKERS = {22: 8, 23: 16, 24: 32, 25: 64}
MMM_TABLE_WORKERS = {27: 8, 28: 16, 29: 32, 30: 64}

SEED_TABLES = {
    22: {
        "arrival_rate": (1798.0, 6854.0, 6837.0, 6993.0, 6984.0),
        "traffic_intensity": (0.25614, 0.97611, 0.97371, 0.996, 0.99468),
        "prob_zero_jobs": (0.74386, 0.02389, 0.02629, 0.004, 0.00532),
        "prob_at_least_5": (0.0011, 0.88613, 0.87528, 0.98014, 0.9737),
        "prob_at_least_10": (0.0, 0.78523, 0.76611, 0.96068, 0.94809),
        "mean_jobs_in_system": (0.34434, 40.86265, 37.03582, 248.76123, 187.09454),
        "var_jobs_in_system": (0.46291, 1711.0, 1409.0, 62131.0, 35191.0),
        "mean_jobs_in_queue": (0.0882, 39.88653, 36.06211, 247.76523, 186.09986),
        "var_jobs_in_queue": (0.14116, 1709.0, 1407.0, 62129.0, 35189.0),
        "mean_response_time_ms": (0.19146, 5.96214, 5.41712, 35.57137, 26.7887),
        "var_response_time_ms2": (0.03666, 35.54712, 29.34517, 1265.0, 717.63467),
        "response_time_p90_ms": (0.44086, 13.72834, 12.47338, 81.90609, 61.68327),
        "response_time_p99_ms": (0.88172, 27.45667, 24.94675, 163.81219, 123.36654),
        "mean_waiting_time_ms": (0.04904, 5.81972, 5.2747, 35.42894, 26.64628),
        "var_waiting_time_ms2": (0.01637, 35.52683, 29.32488, 1265.0, 717.61438),
        "waiting_time_p90_ms": (0.18008, 13.58419, 12.32905, 81.76339, 61.54047),
        "waiting_time_p99_ms": (0.62094, 27.31252, 24.80242, 163.66948, 123.22374),
    },
    23: {
        "arrival_rate": (1802.0, 7734.0, 13771.0, 13717.0, 13737.0),
        "traffic_intensity": (0.13004, 0.55809, 0.99364, 0.98974, 0.99125),
        "prob_zero_jobs": (0.86996, 0.44191, 0.00636, 0.01026, 0.00875),
        "prob_at_least_5": (4e-05, 0.05414, 0.9686, 0.94973, 0.95701),
        "prob_at_least_10": (0.0, 0.00293, 0.93819, 0.90198, 0.91587),
        "mean_jobs_in_system": (0.14948, 1.26291, 156.22515, 96.43381, 113.29105),
        "var_jobs_in_system": (0.17182, 2.85785, 24563.0, 9396.0, 12948.0),
        "mean_jobs_in_queue": (0.01944, 0.70482, 155.23151, 95.44407, 112.29979),
        "var_jobs_in_queue": (0.02487, 1.98829, 24561.0, 9394.0, 12946.0),
        "mean_response_time_ms": (0.08294, 0.16328, 11.34484, 7.03049, 8.24686),
        "var_response_time_ms2": (0.00688, 0.02666, 128.7053, 49.42786, 68.01063),
        "response_time_p90_ms": (0.19098, 0.37597, 26.12245, 16.18831, 18.98909),
        "response_time_p99_ms": (0.38196, 0.75195, 52.2449, 32.37662, 37.97817),
        "mean_waiting_time_ms": (0.01079, 0.09113, 11.27268, 6.95834, 8.1747),
        "var_waiting_time_ms2": (0.00167, 0.02146, 128.70009, 49.42265, 68.00543),
        "waiting_time_p90_ms": (0.02179, 0.28074, 26.05006, 16.11578, 18.91661),
        "waiting_time_p99_ms": (0.21277, 0.65672, 52.17251, 32.3041, 37.9057),
    },
    24: {
        "arrival_rate": (1806.0, 7734.0, 14486.0, 16838.0, 18892.0),
        "traffic_intensity": (0.09526, 0.40802, 0.76419, 0.88826, 0.9966),
        "prob_zero_jobs": (0.90474, 0.59198, 0.23581, 0.11174, 0.0034),
        "prob_at_least_5": (1e-05, 0.01131, 0.26062, 0.55296, 0.98313),
        "prob_at_least_10": (0.0, 0.00013, 0.06792, 0.30577, 0.96654),
        "mean_jobs_in_system": (0.10529, 0.68924, 3.24074, 7.94922, 293.37127),
        "var_jobs_in_system": (0.11638, 1.16428, 13.7431, 71.13938, 86360.0),
        "mean_jobs_in_queue": (0.01003, 0.28122, 2.47654, 7.06097, 292.37467),
        "var_jobs_in_queue": (0.01204, 0.58979, 12.39492, 69.46212, 86358.0),
        "mean_response_time_ms": (0.05831, 0.08911, 0.22371, 0.4721, 15.52896),
        "var_response_time_ms2": (0.0034, 0.00794, 0.05005, 0.22288, 241.14844),
        "response_time_p90_ms": (0.13426, 0.20519, 0.51511, 1.08705, 35.75674),
        "response_time_p99_ms": (0.26852, 0.41038, 1.03023, 2.17409, 71.51348),
        "mean_waiting_time_ms": (0.00555, 0.03636, 0.17096, 0.41935, 15.4762),
        "var_waiting_time_ms2": (0.00062, 0.00516, 0.04726, 0.22009, 241.14566),
        "waiting_time_p90_ms": (0.0, 0.1253, 0.45495, 1.03111, 35.7039),
        "waiting_time_p99_ms": (0.13143, 0.33049, 0.97006, 2.11815, 71.46064),
    },
    25: {
        "arrival_rate": (1842.0, 7749.0, 14220.0, 17254.0, 24182.0),
        "traffic_intensity": (0.07182, 0.30208, 0.55436, 0.67262, 0.9427),
        "prob_zero_jobs": (0.92818, 0.69792, 0.44564, 0.32738, 0.0573),
        "prob_at_least_5": (0.0, 0.00252, 0.05235, 0.13767, 0.74449),
        "prob_at_least_10": (0.0, 1e-05, 0.00274, 0.01895, 0.55427),
        "mean_jobs_in_system": (0.07738, 0.43282, 1.24395, 2.05457, 16.45099),
        "var_jobs_in_system": (0.08336, 0.62016, 2.79136, 6.27581, 287.08607),
        "mean_jobs_in_queue": (0.00556, 0.13074, 0.68959, 1.38194, 15.50829),
        "var_jobs_in_queue": (0.00639, 0.22683, 1.92969, 5.15077, 285.25469),
        "mean_response_time_ms": (0.042, 0.05586, 0.08748, 0.11908, 0.6803),
        "var_response_time_ms2": (0.00176, 0.00312, 0.00765, 0.01418, 0.46281),
        "response_time_p90_ms": (0.09671, 0.12861, 0.20142, 0.27419, 1.56645),
        "response_time_p99_ms": (0.19342, 0.25723, 0.40285, 0.54837, 3.13289),
        "mean_waiting_time_ms": (0.00302, 0.01687, 0.04849, 0.08009, 0.64132),
        "var_waiting_time_ms2": (0.00024, 0.0016, 0.00613, 0.01266, 0.46129),
        "waiting_time_p90_ms": (0.0, 0.06175, 0.14982, 0.22696, 1.5263),
        "waiting_time_p99_ms": (0.08281, 0.19036, 0.35124, 0.50115, 3.09275),
    },
    27: {
        "arrival_rate": (1798.0, 6854.0, 6837.0, 6993.0, 6984.0),
        "traffic_intensity": (0.25614, 0.97611, 0.97371, 0.996, 0.99468),
        "prob_zero_jobs": (0.12884, 6.000000000000001e-05, 7.000000000000001e-05, 1e-05, 1e-05),
        "prob_queueing": (0.00134, 0.92394, 0.91645, 0.98705, 0.98282),
        "mean_jobs_in_system": (2.0496, 45.56346, 41.73107, 253.50727, 191.83765),
        "var_jobs_in_system": (2.05265, 1713.0, 1411.0, 62133.0, 35194.0),
        "mean_jobs_in_queue": (0.00046, 37.75457, 33.9414, 245.5393, 183.88018),
        "var_jobs_in_queue": (0.00078, 1698.0, 1396.0, 62117.0, 35178.0),
        "mean_response_time_ms": (1.13963, 6.64802, 6.10388, 36.25002, 27.46783),
        "var_response_time_ms2": (1.29827, 36.63963, 30.43848, 1266.0, 718.72101),
        "mean_waiting_time_ms": (0.00026, 5.50865, 4.96451, 35.11065, 26.32846),
        "var_waiting_time_ms2": (0.0001, 35.34146, 29.14031, 1265.0, 717.42285),
        "waiting_time_p90_ms": (0.0, 13.25667, 12.00073, 81.44237, 61.21903),
        "waiting_time_p99_ms": (0.0, 26.98501, 24.47411, 163.34846, 122.9023),
    },
    28: {
        "arrival_rate": (1802.0, 7734.0, 13771.0, 13717.0, 13737.0),
        "traffic_intensity": (0.13004, 0.55809, 0.99364, 0.98974, 0.99125),
        "prob_zero_jobs": (0.12485, 0.00013, 0.0, 0.0, 0.0),
        "prob_queueing": (0.0, 0.02334, 0.97033, 0.95236, 0.95931),
        "mean_jobs_in_system": (2.08066, 8.95893, 167.48782, 107.67597, 124.54118),
        "var_jobs_in_system": (2.08066, 9.2409, 24568.0, 9401.0, 12953.0),
        "mean_jobs_in_queue": (0.0, 0.02947, 151.58958, 91.84018, 108.68117),
        "var_jobs_in_queue": (0.0, 0.10305, 24536.0, 9370.0, 12922.0),
        "mean_response_time_ms": (1.15451, 1.15832, 12.16271, 7.8501, 9.06579),
        "var_response_time_ms2": (1.33288, 1.33411, 129.92486, 50.64858, 69.23091),
        "mean_waiting_time_ms": (0.0, 0.00381, 11.00821, 6.6956, 7.91129),
        "var_waiting_time_ms2": (0.0, 0.00123, 128.59198, 49.3157, 67.89803),
        "waiting_time_p90_ms": (0.0, 0.0, 25.78073, 15.84518, 18.6465),
        "waiting_time_p99_ms": (0.0, 0.13838, 51.90318, 32.03349, 37.63559),
    },
    29: {
        "arrival_rate": (1806.0, 7734.0, 14486.0, 16838.0, 18892.0),
        "traffic_intensity": (0.09526, 0.40802, 0.76419, 0.88826, 0.9966),
        "prob_zero_jobs": (0.04743, 0.0, 0.0, 0.0, 0.0),
        "prob_queueing": (0.0, 1e-05, 0.10111, 0.41161, 0.97715),
        "mean_jobs_in_system": (3.04841, 13.05652, 24.78183, 31.69628, 318.55853),
        "var_jobs_in_system": (3.04841, 13.05662, 29.27101, 84.70988, 86371.0),
        "mean_jobs_in_queue": (0.0, 0.0, 0.32769, 3.27201, 286.66724),
        "var_jobs_in_queue": (0.0, 1e-05, 2.3442, 44.5858, 86308.0),
        "mean_response_time_ms": (1.68809, 1.6881, 1.71072, 1.88242, 16.86219),
        "var_response_time_ms2": (2.84966, 2.84966, 2.85927, 2.99538, 243.87218),
        "mean_waiting_time_ms": (0.0, 0.0, 0.02262, 0.19432, 15.17409),
        "var_waiting_time_ms2": (0.0, 0.0, 0.00961, 0.14572, 241.02252),
        "waiting_time_p90_ms": (0.0, 0.0, 0.00248, 0.66798, 35.39776),
        "waiting_time_p99_ms": (0.0, 0.0, 0.51759, 1.75502, 71.1545),
    },
    30: {
        "arrival_rate": (1842.0, 7749.0, 14220.0, 17254.0, 24182.0),
        "traffic_intensity": (0.07182, 0.30208, 0.55436, 0.67262, 0.9427),
        "prob_zero_jobs": (0.01009, 0.0, 0.0, 0.0, 0.0),
        "prob_queueing": (0.0, 0.0, 1e-05, 0.00182, 0.53959),
        "mean_jobs_in_system": (4.59646, 19.33287, 35.47889, 43.05149, 69.20944),
        "var_jobs_in_system": (4.59646, 19.33287, 35.47931, 43.14493, 315.0321),
        "mean_jobs_in_queue": (0.0, 0.0, 1e-05, 0.00373, 8.87686),
        "var_jobs_in_queue": (0.0, 0.0, 5e-05, 0.01904, 222.14442),
        "mean_response_time_ms": (2.49494, 2.49494, 2.49494, 2.49515, 2.86202),
        "var_response_time_ms2": (6.22472, 6.22472, 6.22472, 6.22477, 6.58942),
        "mean_waiting_time_ms": (0.0, 0.0, 0.0, 0.00022, 0.36709),
        "var_waiting_time_ms2": (0.0, 0.0, 0.0, 5e-05, 0.3647),
        "waiting_time_p90_ms": (0.0, 0.0, 0.0, 0.0, 1.14674),
        "waiting_time_p99_ms": (0.0, 0.0, 0.0, 0.0, 2.71319),
    },
}

ROW_TO_METRIC = {
    "traffic_intensity": lambda q: q.traffic_intensity,
    "prob_zero_jobs": lambda q: q.prob_zero_jobs,
    "prob_queueing": lambda q: q.prob_queueing,
    "prob_at_least_5": lambda q: q.prob_at_least_jobs(5),
    "prob_at_least_10": lambda q: q.prob_at_least_jobs(10),
    "mean_jobs_in_system": lambda q: q.mean_jobs_in_system,
    "var_jobs_in_system": lambda q: q.var_jobs_in_system,
    "mean_jobs_in_queue": lambda q: q.mean_jobs_in_queue,
    "var_jobs_in_queue": lambda q: q.var_jobs_in_queue,
    "mean_response_time_ms": lambda q: q.mean_response_time * 1e3,
    "var_response_time_ms2": lambda q: q.var_response_time * 1e6,
    "response_time_p90_ms": lambda q: q.response_time_percentile(90) * 1e3,
    "response_time_p99_ms": lambda q: q.response_time_percentile(99) * 1e3,
    "mean_waiting_time_ms": lambda q: q.mean_waiting_time * 1e3,
    "var_waiting_time_ms2": lambda q: q.var_waiting_time * 1e6,
    "waiting_time_p90_ms": lambda q: q.waiting_time_percentile(90) * 1e3,
    "waiting_time_p99_ms": lambda q: q.waiting_time_percentile(99) * 1e3,
}


def _seed_model(table: int, column: int):
    """The model of one table column, with lambda = rho * (m mu).

    The tables print lambda rounded to an integer; at rho = 0.996 that rounding moves
    1 / (1 - rho) by 1 %, so lambda is recovered from the five-digit traffic intensity.
    """
    rows = SEED_TABLES[table]
    if table in MM1_TABLE_WORKERS:
        service_rate = SERVICE_RATE_PER_WORKER[MM1_TABLE_WORKERS[table]] * MM1_TABLE_WORKERS[table]
        return mm1(rows["traffic_intensity"][column] * service_rate, service_rate)
    m = MMM_TABLE_WORKERS[table]
    mu = SERVICE_RATE_PER_WORKER[m]
    return mmm(rows["traffic_intensity"][column] * m * mu, mu, m)


SEED_CASES = [(table, column) for table in SEED_TABLES for column in range(5)]


@pytest.mark.parametrize(("table", "column"), SEED_CASES)
def test_every_metric_matches_seed_000_tables_22_to_30(table, column):
    model = _seed_model(table, column)
    for row, values in SEED_TABLES[table].items():
        if row == "arrival_rate":
            continue
        expected, actual = values[column], ROW_TO_METRIC[row](model)
        # The tables print 5 decimals (1e-5 absolute) or 5 significant digits; the rest
        # of the slack is the 5-digit rho the arrival rate is rebuilt from.
        assert actual == pytest.approx(expected, rel=5e-3, abs=1e-5), (table, column, row)


@pytest.mark.parametrize(("table", "column"), SEED_CASES)
def test_seed_tables_quoted_arrival_rate_gives_their_traffic_intensity(table, column):
    rows = SEED_TABLES[table]
    workers = MM1_TABLE_WORKERS.get(table) or MMM_TABLE_WORKERS[table]
    capacity = SERVICE_RATE_PER_WORKER[workers] * workers
    if table in MM1_TABLE_WORKERS:
        model = mm1(rows["arrival_rate"][column], capacity)
    else:
        model = mmm(rows["arrival_rate"][column], SERVICE_RATE_PER_WORKER[workers], workers)
    assert model.traffic_intensity == pytest.approx(rows["traffic_intensity"][column], abs=1e-3)


def _birth_death_distribution(arrival_rate, service_rate, servers, size=4000):
    """Stationary P(n) of the M/M/m chain by the balance equations, truncated at `size`."""
    p = np.empty(size)
    p[0] = 1.0
    for n in range(1, size):
        p[n] = p[n - 1] * arrival_rate / (min(n, servers) * service_rate)
    return p / p.sum()


@pytest.mark.parametrize(
    ("arrival_rate", "service_rate", "servers"),
    [(3.0, 1.0, 4), (7734.0, 866.17135, 16), (0.5, 2.0, 1), (90.0, 1.0, 100), (950.0, 10.0, 100)],
)
def test_mmm_formulas_match_the_birth_death_chain(arrival_rate, service_rate, servers):
    p = _birth_death_distribution(arrival_rate, service_rate, servers)
    n = np.arange(p.size)
    in_queue = np.maximum(n - servers, 0)
    model = mmm(arrival_rate, service_rate, servers)
    mean_n = np.dot(n, p)
    mean_q = np.dot(in_queue, p)
    assert model.prob_zero_jobs == pytest.approx(p[0], rel=1e-9)
    assert model.prob_queueing == pytest.approx(p[servers:].sum(), rel=1e-9, abs=1e-15)
    assert model.mean_jobs_in_system == pytest.approx(mean_n, rel=1e-9)
    assert model.var_jobs_in_system == pytest.approx(np.dot(n**2, p) - mean_n**2, rel=1e-8)
    assert model.mean_jobs_in_queue == pytest.approx(mean_q, rel=1e-8, abs=1e-15)
    assert model.var_jobs_in_queue == pytest.approx(np.dot(in_queue**2, p) - mean_q**2, rel=1e-8, abs=1e-15)
    # Little's law: E[r] = E[n] / lambda and E[w] = E[n_q] / lambda.
    assert model.mean_response_time == pytest.approx(mean_n / arrival_rate, rel=1e-9)
    assert model.mean_waiting_time == pytest.approx(mean_q / arrival_rate, rel=1e-8, abs=1e-18)
    for jobs in (0, 1, servers - 1, servers, servers + 3):
        assert model.prob_jobs(jobs) == pytest.approx(p[jobs], rel=1e-9)
        assert model.prob_at_least_jobs(jobs) == pytest.approx(p[jobs:].sum(), rel=1e-8, abs=1e-15)
    assert model.prob_jobs_in_queue(0) == pytest.approx(p[: servers + 1].sum(), rel=1e-9)
    assert model.prob_jobs_in_queue(2) == pytest.approx(p[servers + 2], rel=1e-9)


def test_mm1_distributions_match_the_birth_death_chain():
    p = _birth_death_distribution(3.0, 4.0, 1)
    model = mm1(3.0, 4.0)
    for jobs in (0, 1, 5):
        assert model.prob_jobs(jobs) == pytest.approx(p[jobs], rel=1e-9)
        assert model.prob_at_least_jobs(jobs) == pytest.approx(p[jobs:].sum(), rel=1e-9)
    assert model.prob_jobs_in_queue(0) == pytest.approx(p[0] + p[1], rel=1e-9)
    assert model.prob_jobs_in_queue(3) == pytest.approx(p[4], rel=1e-9)


def test_mm1_busy_period_distribution_has_the_box_mean():
    model = mm1(2.0, 5.0)
    n = np.arange(1, 400)
    p = np.array([model.prob_busy_period_serves(k) for k in n])
    assert p.sum() == pytest.approx(1.0, rel=1e-9)
    assert np.dot(n, p) == pytest.approx(model.mean_jobs_per_busy_period, rel=1e-9)
    assert np.dot(n**2, p) - np.dot(n, p) ** 2 == pytest.approx(model.var_jobs_per_busy_period, rel=1e-8)


def test_mm1_90_percentile_is_jains_2_3_mean_response_time():
    model = mm1(60.0, 100.0)
    assert model.response_time_percentile(90) == pytest.approx(2.3 * model.mean_response_time, rel=2e-3)
    assert model.response_time_cdf(model.response_time_percentile(90)) == pytest.approx(0.9)
    assert model.waiting_time_cdf(model.waiting_time_percentile(90)) == pytest.approx(0.9)


@pytest.mark.parametrize(
    ("arrival_rate", "service_rate", "servers"), [(10.0, 1.0, 16), (3.0, 2.0, 2), (13771.0, 866.17135, 16)]
)
def test_mmm_response_time_percentile_matches_numerical_convolution(arrival_rate, service_rate, servers):
    model = mmm(arrival_rate, service_rate, servers)
    delta, mu = model.prob_queueing, service_rate
    a = servers * mu - arrival_rate

    def cdf(t):
        # r = w + s: no wait with probability 1 - delta, else w ~ Exp(a); s ~ Exp(mu).
        waited, _ = integrate.quad(lambda w: a * math.exp(-a * w) * -math.expm1(-mu * (t - w)), 0.0, t)
        return (1 - delta) * -math.expm1(-mu * t) + delta * waited

    for q in (50, 90, 99):
        t = model.response_time_percentile(q)
        assert cdf(t) == pytest.approx(q / 100, abs=1e-7)


rates = st.floats(min_value=1e-3, max_value=1e6, allow_nan=False)
intensities = st.floats(min_value=1e-4, max_value=0.999)


@given(intensities, rates)
def test_mm1_equals_mmm_with_one_server(rho, mu):
    single, multi = mm1(rho * mu, mu), mmm(rho * mu, mu, 1)
    for field in (
        "traffic_intensity prob_zero_jobs prob_queueing mean_jobs_in_system var_jobs_in_system "
        "mean_jobs_in_queue var_jobs_in_queue mean_response_time var_response_time "
        "mean_waiting_time var_waiting_time utilization throughput"
    ).split():
        assert getattr(multi, field) == pytest.approx(getattr(single, field), rel=1e-9, abs=1e-300), field
    for q in (10, 50, 90, 99):
        assert multi.response_time_percentile(q) == pytest.approx(single.response_time_percentile(q), rel=1e-7)
        # abs: at rho = 1 - q/100 the percentile is ln(1 + rounding error), i.e. ~1e-16 E[r].
        tiny = 1e-12 * single.mean_response_time
        assert multi.waiting_time_percentile(q) == pytest.approx(single.waiting_time_percentile(q), rel=1e-9, abs=tiny)
    for n in (0, 1, 7):
        assert multi.prob_jobs(n) == pytest.approx(single.prob_jobs(n), rel=1e-9)


@given(intensities, rates, st.integers(min_value=1, max_value=300))
def test_mmm_is_consistent_with_littles_law(rho, mu, servers):
    model = mmm(rho * servers * mu, mu, servers)
    assert 0.0 <= model.prob_queueing <= 1.0
    assert model.mean_jobs_in_system == pytest.approx(model.arrival_rate * model.mean_response_time, rel=1e-9)
    assert model.mean_response_time == pytest.approx(model.mean_waiting_time + 1 / mu, rel=1e-9)


def test_unstable_system_raises_with_rho_in_the_message():
    with pytest.raises(UnstableSystemError, match="rho = 1.25"):
        mm1(125.0, 100.0)
    with pytest.raises(UnstableSystemError, match="rho = 1"):
        mmm(800.0, 100.0, 8)
    assert issubclass(UnstableSystemError, ValueError)


@pytest.mark.parametrize(
    ("arrival_rate", "service_rate"), [(0.0, 1.0), (-1.0, 1.0), (1.0, 0.0), (math.nan, 1.0), (1.0, math.inf)]
)
def test_non_positive_or_non_finite_rates_are_rejected(arrival_rate, service_rate):
    with pytest.raises(ValueError, match="rate"):
        mm1(arrival_rate, service_rate)
    with pytest.raises(ValueError, match="rate"):
        mmm(arrival_rate, service_rate, 2)


@pytest.mark.parametrize("servers", [0, -2, 2.5, True, "8"])
def test_bad_server_counts_are_rejected(servers):
    with pytest.raises(ValueError, match="servers"):
        mmm(1.0, 1.0, servers)


def test_percentile_outside_0_100_is_rejected():
    with pytest.raises(ValueError, match="percentile"):
        mm1(1.0, 2.0).response_time_percentile(100)


def test_results_are_frozen_and_serialise_to_json():
    import json

    single = mm1(1.0, 2.0)
    assert isinstance(single, MM1) and isinstance(mmm(1.0, 2.0, 3), MMm)
    with pytest.raises(AttributeError):
        single.traffic_intensity = 0.1  # type: ignore[misc]
    record = json.loads(json.dumps(mmm(7734.0, 866.17135, 16).to_dict(percentiles=(50, 90))))
    assert record["servers"] == 16
    assert set(record["response_time_percentiles"]) == {"50", "90"}
    assert record["prob_at_least_jobs"]["5"] == pytest.approx(0.9427, abs=1e-3)
