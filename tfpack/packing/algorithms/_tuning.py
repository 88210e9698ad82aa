"""The `optimal` planner's tuning constants, each with the measurement that chose it.

One object, `Tuning`, read by the planner's modules when they run (so a test
may change one with ``monkeypatch.setattr(Tuning, NAME, value)``). The paths
they tune are described in ``docs/packing.md`` ("How `optimal` works"). Suite
cases are those of ``benchmarks/planners_suite.py``; times are CPU seconds.

>>> Tuning.MAX_ROUNDS, Tuning.LP_GAP
(200, 0.0001)
"""

from __future__ import annotations

__all__ = ["Tuning"]


class Tuning:
    """The constants (namespace only: never instantiated)."""

    # --- Column generation (`_column_generation`) ---
    MAX_ROUNDS = 200  # column generation rounds; the bound is valid at any round
    ROW_ROUNDS = 100_000  # and at most this many rounds x lengths (a round costs ~ lengths)
    LP_GAP = 1e-4  # stop when the LP value is this close (relative) to the bound: 0.01 pp
    SEED_DEPTH_WEIGHTS = (0.1, 0.0, 0.2, 0.3)  # affine seed values (`seed_patterns`)
    SEED_COLUMNS = 1024  # first-LP pricing sets: as many as keep them under this many columns
    SEED_TOKENS = 4096  # seed pricing on lengths rounded up to fit a table this wide
    COLUMNS_PER_ROUND = 64  # candidate packs per round (one per longest length), or n / 8 if more
    IMPROVES = 1e-9  # a pack improves the LP if worth more than 1 + this
    BOUND_MARGIN = 1e-9  # relative margin when rounding the LP bound up to an integer
    DUAL_BITS = 40  # pricing sees the duals rounded up to multiples of 2**-40 (`plateaus`)
    SMOOTHING = 0.5  # price at this mix of the best duals so far and the LP's (Wentges)
    EARLY_ROWS = 2048  # round every LP within a pack of the bound, up to this many lengths
    EARLY_FILL = 0.6  # with this round-up fill (see `_rounding.round_lp`)

    # --- Plans from an LP (`_lp_plan`) ---
    GOOD_ENOUGH = 1e-5  # skip the LP when best fit is this close (relative) to the token bound
    # Round a pack up when slots still needed hold this share of its tokens; one
    # rounding per value, the best kept (0.6 was best or tied on every histogram tried).
    ROUND_UP_FILLS = (1.0, 0.8, 0.6)
    ROUNDING_PACKS = 2  # rounding an LP solution loses about this many packs; see `slack`
    # Up to EARLY_ROWS lengths, dive (`_diving.dive`) with these in turn until a dive
    # gives a better plan, when the plan is at least DIVE_GAP packs above the bound:
    # closer, dives rarely gained the last pack, and cost up to 0.15 s on 500 lengths.
    DIVE_UP_FROM = (0.6, 0.9)
    DIVE_GAP = 2
    # No dives for the grouped plans of long contexts (`_paths.plan_up`, L=12,288-32,767): on the
    # long-context suite's seed 12 (long48, in-process) 71 dives on 140,733-693,962 packs gained
    # 1-5 packs (0.002% at most) and took up to 0.52 s of CPU (0.27-0.52 s on seven that gained
    # nothing), the time of the finer plans and bounds (fresh 306/35, L=16,384 depth 16: the
    # first plan's dives 0.15 s, its finer plan cut: 0.145% -> 0.214%; without dives 0.139%).
    REPAIR_SHARE = 0.15  # of a grouped plan's time (`_paths.plan_up`), kept for `repair`
    # where it has fewer packs than this a row. Rounding loses about a pack per 70 rows (C
    # headers, L=8,192 depth 4: 12 on 840), so below 32 packs a row more than a quarter of
    # the 0.2% target: there the repair pays for the LP's shorter time. With more, the LP's
    # time counts more (log-normal L=32,768 depth 16, 60 a row: 61,303 packs without a
    # repair, 61,307-61,316 with it; L=8,192 depth 3, 138 a row: 124,103 and 124,122).
    REPAIR_PACKS_PER_ROW = 32

    # --- Spread fill (`_spread_fill`, `optimal._spread_pays`) ---
    # From `LONG_CONTEXT_FROM`, at depth 6 or more (`SPREAD_TIERS`), where the sequences shorter
    # than L need within SPREAD_BAND of the slots of the packs their tokens need, the spread fill's plan
    # is offered beside best fit's. Over the long-context suite's seeds 0-10 (520 cases) that is 2
    # cases, the two where the plan was out by most: seed 8 case 22 (L=16,384 depth 8, 0.989 of the
    # slots; 0.729% -> 0.346%) and seed 10 case 44 (depth 12, 0.979; 1.096% -> 0.490%). At depth 4-6
    # the fill did worse than the LP's plans (0.8-19% above the bound on the 8 cases within 7%);
    # where the depth alone binds (the slots 1.1-2.1x) it met the bound on 5 of 6 cases at depth 8,
    # but the plan was not what was out there (seed 3 case 10: the bound; the fill 1.57%).
    # Session 20 (AVX2 CPU): up to 1.3. Where the depth binds past the tokens the grouped plan's
    # LP, after the rounded-down LP's half, was cut: 562/42 (depth 12, 1.187 of the slots)
    # 68,115-69,775 packs on 65,544 (3.9-6.5%); with the fill, 65,561 (0.026%). The 11 cases
    # over 1.05 at depth 6+ of seeds 554-563 gained or held with the cap at 1.3 and without one
    # (3/10, 2.06: 0.014% -> 0.001%), and the main suite's zipf L=32,768 depth 32 (1.21) went
    # 147 -> 145 packs on 145; without a cap its zipf L=65,536 depth 8 (6.8: 9.6e6 sequences)
    # took 3.65 s, the fill's 1.2e6 packs made into a plan after its budget.
    SPREAD_BAND = 0.3
    # Under the slots, from 0.72 at depth 12-16 (long47): the fill settled (SPREAD_SETTLE) where the
    # sequences are 0.85-0.95 of the slots, on the 13 such cases of fresh seeds 13-69 at depth
    # 8-16 (found by scanning for that share; 12 out of 0.2% on the path they took before):
    # 12 within (13/40 0.269% -> 0.144%, 59/8 0.987% -> 0.160%, 69/44 0.940% -> 0.160%), one
    # worse (40/36 0.293% -> 0.545%, its tries given up and the grouped LP cut by their time).
    # Further under (seeds 14-56 scanned at 0.70-0.85; the fill forced on in-process, one run
    # each): 0.818 of the slots, depth 16 (55/36) 0.788% -> 0.139%; at 0.781, 0.760 and 0.754
    # (depth 8) the path they took was within and better (0.167 / 0.125 / 0.121% against the
    # fill's 0.210 / 0.174 / 0.181%): the band starts at 0.80. At depth 12-16 it
    # starts at 0.72: of the 9 cases at 0.72-0.80 there (seeds 56-177, the fill forced on
    # in-process), 7 were out as they were (0.237-0.357%); with the fill 8 within (0.139-0.184%;
    # 177/18 0.199 -> 0.145%, 163/14 0.150 -> 0.157%), 107/32 0.256 -> 0.223%; at 0.718, 158/32
    # went 0.127 -> 0.365%.
    # (That band was 0.72 under the slots at depth 12-16, 0.86 at depth 8: `SPREAD_TIERS`.)
    # Below depth 12, from 0.86. At depth 12-16 the fill
    # settled gained on all 20 cases found at 0.78-0.95 of the slots (seeds 14-122); at depth
    # 8 it lost on fresh 116/12 (0.851: 0.131% -> 0.522%, run after SPREAD_BELOW 0.2 was fixed)
    # and 40/36 (0.927, out both ways), and gained from 0.866 on (21/38, 17/8, 64/28, 13/40, 61/38).
    # The tiers by depth (session 14), once the pass was compiled and the class fill followed
    # every first try not within SPREAD_GAP: (from depth, how far under the slots the band
    # starts, whether the whole fill runs). In-process, 1 s each, against b5c8610, the 18 cases
    # at 0.55-0.72 (depth 12-16) and 0.70-0.86 (depth 8-11) found in seeds 42-67, 116, 158,
    # 308-352 (none ran the fill on b5c8610): out of 0.2% with the path they took / one settled
    # try / the whole fill: 329/20 0.208 / 0.128 / 0.128%, 67/0 0.223 / 0.182 / 0.182%, 350/26
    # 0.226 / 0.259 / 0.181%, 352/6 0.193 / 0.222 / 0.144%; 116/12 (0.851, which lost before
    # the class fill followed the first try) 0.116 -> 0.037%, 158/32 (0.718) 0.118 -> 0.087%;
    # their class fills, settled, 0.057-0.236%. Depth 12-16 from 0.55. At depth 8-11 the fill
    # lost below 0.78 (54/0 at 0.701 0.106 -> 0.162%, 312/22 at 0.725 0.094 -> 0.107%, 44/2 at
    # 0.760 0.122 -> 0.174%, and fresh 397/40 at 0.713 out, 0.133 -> 0.383%, the fill's 0.8 s
    # leaving the grouped LP none) and gained from 0.783 (352/6): from 0.78.
    # At depth 6-7, only where the depth binds (from 1.0 of the slots), one try runs as it is
    # (no refills, settling or class fill: the third field False) and, not within SPREAD_GAP,
    # leaves the time to the grouped LP: fresh 383/10 (1.017 of the slots) 2.110% -> 0.001%
    # (its first try), 378/8 (1.006) 0.085 -> 0.102%. The whole fill there from 0.86 brought
    # 308/36 in (0.986: 0.255% -> 0.154%), but its class fills are poor at depth 6 (0.13-1.45%)
    # and its time cost the grouped LP's bound: on fresh seeds 378-389, 378/8 0.085% -> 0.319%
    # (its plan better, 141,907 packs on 141,966, the LP bound 141,846 unproven), 387/6 (0.903)
    # 0.183 -> 0.267%; one try from 0.86 put 372/18 and 55/24 (0.95-0.96) at 0.268% and
    # 0.223% (0.200% and 0.193% without). Below depth 6 the fill does not run.
    SPREAD_TIERS = ((12, 0.45, True), (8, 0.22, True), (6, 0.0, False))
    SPREAD_BATCH = 1024  # packs it opens at once (256: 0.47% and 0.44% on those two cases)
    # The fill is chaotic: with its slot targets (but the last's) scaled by 0.995-0.96, the
    # long-context suite's spread cases (seeds 8, 10, 12, 26, 78, 82, 84, 108) moved either
    # way by up to 0.4 points (seed 82 case 30: 0.373% at 1, 0.065-0.217% at 0.98-0.975;
    # seed 8 case 22: 0.250% at 1, 0.229-0.657% below). So `_spread_fill.best` tries these
    # in turn, each while the time left (SPREAD_SHARE of it) is at least what the last took,
    # until a plan is within SPREAD_GAP of the bound (the 0.2% target; the rest of
    # the search keeps its time for a better bound). Before the pass was compiled (0.1-0.15 s
    # a try, now 0.03-0.05 s) the tries gave up after try i where the best plan was over
    # (0.01, 0.006)[i] above the bound, and only then the class fill ran: fresh seed 187 case
    # 42 (L=16,384 depth 8), whose nine tries at 1-0.96 were 0.68-0.88%, went 0.429% -> 0.676%
    # with them all. The class fill now follows the first try wherever it is not within
    # SPREAD_GAP (`_spread_fill.best`): 187/42 0.183% either way.
    # After each try the last SPREAD_TAIL of its packs is refilled at each (scale, batch) of
    # SPREAD_TAILS (`_spread_fill._refilled`): a tenth of a try's time each. Four whole tries so
    # refilled, against the nine whole tries (each run to its end, in one process; seeds 8/22,
    # 108/26, 214/2, 187/42, 152/4, 148/36, 269/8, 289/16, 10/44): 0.229, 0.304, 0.243, 0.676,
    # 0.180, 0.202, 0.178, 0.135, 0.148% -> 0.209, 0.108, 0.235, 0.640, 0.155, 0.177, 0.162,
    # 0.172, 0.121%. Refilling only the best try's tail, eight ways: 0.209, 0.245, 0.224, 0.635,
    # 0.138, 0.177, 0.153, 0.125, 0.048%, within 0.2% later (at 0.44 s instead of 0.13 s on 152/4,
    # 0.39 instead of 0.12 on 269/8). A fifth of the packs: slower, no better.
    SPREAD_SCALES = (1.0, 0.99, 0.98, 0.97)
    SPREAD_TAIL = 0.1
    SPREAD_TAILS = ((1.0, 256), (0.99, 256), (1.0, 64))
    SPREAD_SHARE = 0.75
    SPREAD_GAP = 0.002
    # The class fill (`_class_fill`) after the first try where it is not within SPREAD_GAP,
    # over this many size classes of about equal tokens (0: none), the last SPREAD_CLASS_TAIL
    # of its packs refilled as a try's are. On the 35 cases known to run the fill (seeds
    # 8-317), with the pass compiled, the tries given up as before / the class fill after every
    # first try not within: 34 / 35 within 0.2% (107/32 0.223% -> 0.168%; 314/0 0.145 ->
    # 0.128%; 55/36 0.139 -> 0.180%, 26/36 0.120 -> 0.166%, 90/14 0.157 -> 0.180%, all within).
    SPREAD_CLASSES = 96
    SPREAD_CLASS_TAIL = 0.3
    # Session 21 (the AVX2 CPU of sessions 19-20): at L=12,288-16,384, depth 8-16, the class
    # fill took 0.4-1.0 s (its LP's pricing over 96 classes and every token, 0.1-0.4 s, and
    # HiGHS), 2.4-11 times the first try; begun with what was left of SPREAD_SHARE it ran
    # out on 630/38, 633/10, 591/30 (each 0.4-0.5 s lost, then nothing left to settle).
    # Its LP now runs in units of L / SPREAD_CLASS_UNITS tokens (16 at 16,384, 12 at 12,288:
    # its pricing 12-16 times smaller; 0.19-0.35 s for the whole fill on four of them
    # standalone), and it begins only where SPREAD_CLASS_AFTER times the first try's time
    # (its refills and settling with it) is left. On the 58 cases of fresh seeds 579-638
    # that run the fill (in-process, 1 s, one run each), against 0148a9b: 44 -> 47 within
    # 0.2% with SEARCH_LEAST, mean gap 0.143% -> 0.119%, worst 0.703% -> 0.363% (630/38),
    # CPU over 1.05 s 12 -> 1 (up to 1.40 -> 1.12 s); on the 18 of seeds 554-578: 15 -> 16,
    # over 1.05 s 3 -> 0. Units of L / 4,096 or none: 46 and 45 of the 58 (noise: a case
    # moves 0.1 points between two runs).
    SPREAD_CLASS_AFTER = 1.0
    SPREAD_CLASS_UNITS = 1024
    # After each try's refills (and the class fill's), a pass of `_spread_settle` at each
    # (share dissolved, batch of the refill) in turn, while the plan is not within SPREAD_GAP:
    # the least-filled packs' sequences moved into the others' room, a larger one in place of
    # a smaller where it fits. The 24 cases known to run the fill, run to their end: 8/22 0.209%
    # -> 0.094%, 214/2 0.235% -> 0.165%, 148/36 0.196% -> 0.139% (each within after its first
    # try), no case within 0.2% out; one pass at 0.05 as good as two (0.05, 0.035 at 64) or four
    # everywhere but 187/42 (0.564, 0.555, 0.553% on the tries; its class fill 0.183% -> 0.136%).
    # Shares 0.02-0.1 and batches 64-1,024 moved 8/22 0.090-0.30%; 0.05 at 256 was within on all
    # three (0.05-0.1 s a pass; in-process probes, round long47 of
    # benchmarks/results/planners_long_context.md).
    SPREAD_SETTLE = ((0.05, 256), (0.035, 64))
    # Where the best of the first try and the class fill is not within SPREAD_GAP, these passes
    # go on settling it before the next tries (session 14: after them, fresh 372/18's passes
    # were cut by the tries' time, 0.227%; before them 0.122%), and the best at the end where a
    # later try is the best; each while the time left has what the last took. Chained passes
    # went on gaining (the first try of 90/14, 0.80 of the slots: 0.232% after the two above, 0.157%
    # after (0.1, 64); 8/22 0.094 -> 0.064%, 214/2 0.165 -> 0.130%, 40/36 0.545 -> 0.500% over
    # ten); the same four passes after every try instead took the class fill's time on 187/42
    # (0.183% -> 0.204%) and 26/36 (0.120 -> 0.193%).
    SPREAD_SETTLE_LAST = ((0.02, 256), (0.1, 64), (0.05, 64))

    # --- The best plan settled at the end (`optimal`, `_spread_settle.settled_plan`) ---
    # From LONG_CONTEXT_FROM, the best plan is settled by these passes (share dissolved, batch of
    # the refill) once the paths end, with the kernel's moves up to PLAN_SETTLE_MOVES a sequence.
    # On the final plans of the 88 hardest long-context cases (seeds 317-449), one pass at 1%:
    # 403/16 0.206% -> 0.101% above the bound in 0.10 s of CPU, 398/12 0.205 -> 0.103% (0.2 s),
    # 431/12 0.205 -> 0.118%, 447/40 0.219 -> 0.132%; at the fill's 5%, no pack fewer on 403/16
    # (the refill of 5% of the packs wastes what the moves saved). Moves 0.1 a sequence (the
    # fill's `_MOVES`) stopped before the chains ended: 403/16 0.115%, 397/3 0.173% (none), 378/7
    # 0.209% (none); at 0.3: 0.101, 0.136, 0.146%; more moves found no more. Two passes where
    # time is left: 403/16 0.111%, 398/12 0.097% (one: 0.115%, 0.139%). A third at 1% rarely
    # gains, at 3% and 5% sometimes (fresh 550/30: 0.206% after two, 0.038% after 3% and 5%);
    # each pass is kept only where it leaves fewer packs and starts only with the last one's
    # time left, so the later ones take only time the search left (0.02-0.1 s each).
    PLAN_SETTLE = ((0.01, 64), (0.01, 64), (0.03, 64), (0.05, 64))
    PLAN_SETTLE_MOVES = 0.3
    # Each pass also dissolves a sample of PLAN_SETTLE_SAMPLE of the packs given to the kernel,
    # spread over them, where the depth nearly binds (`optimal._sample`: `_bounds.slots_share`
    # from SAMPLE_SLOTS_FROM, at a depth of SAMPLE_DEPTH_FROM or more), until a pass with it
    # leaves no fewer packs (`_spread_settle`'s notes). Captured at the settle's entry and run
    # to their end, on 12 plans out of 0.2% (seeds 604-729) with a sample in every pass, the
    # packs above the bound went 2,391 -> 1,167 at 2% of the packs of a full depth, 748 at 5%,
    # 786-788 at 3% of any, 758 of those with two sequences or more, 1,828 at 0.5% of those
    # holding the shortest sequences; on 6 grouped LP's plans of seeds 732-735 (slots 0.26-0.63
    # of what the tokens need) 846 -> 1,445, and at depth 4 (720/28, 725/14, 725/42, slots
    # 0.86-0.91) no pass left fewer packs (143 -> 276 on 725/42; 0.3%: 144). From 0.45 the
    # sample gained on all but 720/2 (slots 0.97: 110 -> 116; with the stop after a pass that
    # gained nothing, 45); below it, on 4 of 11. On 43 captured plans: 6,478 with no sample,
    # 5,257 with one wherever, 3,642 with the stop alone, 3,781 with the slots and depth alone;
    # both, on those and 20 more (seeds 728-736): 9,962 -> 6,039, out of 0.2% 10 -> 0, for 10%
    # more CPU.
    PLAN_SETTLE_SAMPLE = 0.03
    SAMPLE_SLOTS_FROM = 0.45
    SAMPLE_DEPTH_FROM = 6
    # The time for it is kept from the search where the tokens bind (the plan is what is loose
    # there), and only where SETTLE_FILLERS of the tokens or more are in sequences of at most
    # L / (2 depth) (`optimal._fillers`): the kernel's chains of moves end where a short
    # sequence fits a pack's room. Without such sequences (narrow documents: 397/3, 447/1,
    # fresh 524/27) a pass took 0.3-0.7 s; cut by the time it saved little, and the time kept
    # cost the plan (524/27 0.091% -> 0.143%). Kept wherever the tokens bind, the narrow cases'
    # bounds lost it (402/21 0.216% -> 0.357%). The most of PLAN_SETTLE_SHARE of the budget and
    # PLAN_SETTLE_PER_SEQUENCE seconds a sequence (a pass: 0.1-0.26 s at 0.5-0.9 million
    # sequences with fillers; 0.25 of the budget cut 398/12's pass, 0.45 left 397/40 without a
    # plan: 7.1%); SETTLE_AFTER_SECONDS a sequence are left after the kernel for the plan to be
    # built again (about 0.1 s at a million). The 88: 76 -> 81 within 0.2%, mean gap 0.169% ->
    # 0.134%; fresh seeds 524-529 (288 cases): 287 -> 288 within (527/6 0.206% -> 0.139%),
    # mean gap 0.0468% -> 0.0426%, none further by 0.02 points, 20 closer. Kept from the
    # grouped plans only, after their rounded-down LP (where it proved no more than the simple
    # bounds): the same 81 of the 88, mean gap 0.0434% on 524-529.
    PLAN_SETTLE_SHARE = 0.35
    # Where the spread fill ran first (`optimal._spread_pays`), of the time it left: the grouped
    # path after it rarely betters its plan there (533/26: 0.02 s were left for settling; the
    # plan 0.407%, 0.289% settled without a limit). On the 42 hard cases that run the fill,
    # 0.35 / 0.8: 39 / 40 within 0.2% (362/44 0.216% -> 0.189%), mean gap 0.124% -> 0.115%,
    # 6 closer by 0.02 points, none further; on the fill cases of fresh seeds 524-539, 524/44
    # 0.153% -> 0.064%, the others the same.
    SPREAD_PLAN_SETTLE_SHARE = 0.8
    PLAN_SETTLE_PER_SEQUENCE = 4e-7
    SETTLE_FILLERS = 0.003
    SETTLE_AFTER_SECONDS = 1e-7
    # The search after the fills (`optimal._search`) runs only where it has SEARCH_LEAST
    # seconds or more (where the best plan is settled at the end): its first LP runs to its
    # end whatever the budget, 0.3-0.6 s on long contexts, so after a spread fill that left
    # 0-0.2 s it ran the plans to 1.25-1.40 s of CPU (fresh 600/14, 634/36, 638/26, 563/38)
    # and took the settling's time. 0.1 still let 0.1-0.25 s through (615/36: 1.12 s);
    # 0.25 on the 76 cases above: 62 -> 63 within (565/6, whose search gained, lost either way).
    SEARCH_LEAST = 0.25

    # --- Full packs first (`_paths.full_packs_first`) ---
    MANY_LENGTHS = 2048  # from this many lengths, full packs first
    # Full packs first gives up when more tokens than this are left: the rest's LP
    # would be slow, its plan poor (1.8-2.4% left where it succeeds, 9-23% where not).
    REST_SHARE = 0.04
    # The rest's LP stops this share of `slack` above its token bound: its rounding
    # loses a few packs more (docs300k d16: gap 10 at a quarter, 6 here, ~1.5x the time).
    REST_LP_SLACK = 1 / 16
    # The rest's LP runs on at most about this many lengths: more are rounded up
    # within groups of neighbours (`_groups`), a few tokens lost a sequence.
    REST_ROWS = 256
    FULL_FIRST_SHARE = 0.4  # of the time limit, for full packs first
    # and only below this max_length: from L=32,768 its greedy (Python, a scan of up to L
    # lengths a join) ran 0.65-1.8 s to give up on the 5 suite cases there (seeds 0-1), and
    # never succeeded; with its 0.4 s share cut off, it only took that time from the plan.
    FULL_FIRST_BELOW = 16384
    # From `LONG_CONTEXT_FROM`, only where sequences of L hold this share of the tokens or more
    # (`optimal._full_windows_pay`): at L=12,288 it took 0.13-0.25 s of 1 s and gave up on the
    # short-document cases out (`planners_long_context.py --seed 5` case 18, `--seed 1` case 40)
    # before the grouped plan, which needed the time; it succeeded only at 38-69% (seed 1 case 30).
    FULL_FIRST_SPIKE = 0.3

    # --- Quick bound (`_paths.quick`) ---
    # Where the tokens bind, with more than QUICK_PLAN_ROWS lengths (fewer than
    # GROUPED_LENGTHS) and a pricing table over SLOW_TABLE cells: with
    # QUICK_PLAN_SHARE of the budget, an LP bound on QUICK_ROWS balanced groups
    # rounded down (QUICK_SHARE of that), then a plan on QUICK_PLAN_ROWS rounded up.
    QUICK_ROWS = 128
    SLOW_TABLE = 2 ** 27  # cells (lengths x (depth + 1) x (L + 1)); 2**24 before the compiled pricing
    QUICK_SHARE = 0.5
    QUICK_PLAN_ROWS = 200
    QUICK_PLAN_SHARE = 0.9

    # --- Candidates and length groups (`optimal`, `_paths.grouped`) ---
    FFD_LENGTHS = 2048  # first fit decreasing competes up to this many lengths (O(L x groups))
    GROUPED_LENGTHS = 1024  # from this many lengths, length groups first
    # Of the time left, for them: the bound's LP ends within it (Zipf at L=2,048, depth 32:
    # 0.3 s of CPU; at 60% it was cut, and the bound fell back to the depth bound, 6.6% below).
    GROUPED_SHARE = 0.85
    # Of the time left, for them where the tokens bind and there are MANY_LENGTHS or more
    # (the plan alone runs there): 0.85 x 0.8 before (with the rounded-down LP after it).
    TOKENS_GROUPED_SHARE = 0.97
    REFINE_LEFT = 0.2  # seconds left, at least, for a plan on twice the groups (`refine`)
    # Groups of the plan where the tokens bind: 896 did better than 768 on every such suite case
    # once pricing was compiled (log-normal L=8,192 depth 3: 124,162 -> 124,140; 640: 124,176).
    BALANCED_ROWS = 896
    BALANCED_ENDS = 16  # exact shortest and longest lengths of `_groups.balanced` groups
    PROVE_GAP = 1e-3  # below MANY_LENGTHS, no grouped plan this far above the bound
    # Where the tokens bind, the rounded-down grouped LP (a bound) runs first only when the
    # best plan so far is this far above the simple bounds: below, it was never above them
    # on the suite; above, they can be loose (stretched documents of about 0.45 L at
    # L=16,384 depth 16: the token bound 10.4% below the plan, this LP's 0.008%). Where it
    # proves nothing, the plan loses its time.
    PROVE_ABOVE = 0.01
    # and from `LONG_CONTEXT_FROM`, where this far (the 0.2% target): best fit 0.2-1% above the
    # simple bounds left them unproven, whatever the time (`planners_long_context.py --seed 2`,
    # case 34, L=16,384 depth 6: 423,568 packs on Martello-Toth's 420,638, 0.697%, with 1 s or
    # 30 s; with the rounded-down LP and the lift first, on 423,408: 0.038%).
    LONG_PROVE_ABOVE = 0.002
    # but below this max_length: at L=32,768-65,536 (planners_suite.py, seed 0) it cost the
    # plans their time for no better bound (log-normal L=32,768 depth 16: 61,317 -> 61,318-
    # 61,324 packs, 0.180% -> 0.191%; spikes L=65,536 depth 24: 5,279,590 -> 5,279,683-
    # 5,279,751 in 1.09-1.11 s of CPU).
    LONG_PROVE_BELOW = 32768
    # Of the grouped path's time, for that LP there. Half (as where the depth binds) cost
    # the suite's log-normal L=8,192 depth 3 its target (124,103-124,140 packs -> 124,190 on
    # the bound 123,912: 0.225%; with a third, 124,159); a fifth lost the LP bound on 3 of
    # the long-context suite's cases, a third on 1 of them (L=16,384 depth 12).
    PROVE_SHARE = 0.33
    # and from `LONG_CONTEXT_FROM` to `LONG_PROVE_BELOW`, this. Once the budget counted only the
    # planner's thread (session 16), the narrow cases (documents of about L / 3, the bound what
    # is loose) reached their 1,024-group LP within it: of the 88 long-context cases ever out by
    # 0.17% (sessions 14-15, in one process, two at a time) 73 within with 0.33, 75 with 0.25,
    # 76 with 0.4 (mean gap 0.173% -> 0.167%; 317/9, 375/7, 378/7, 434/17 in; 431/12 out at
    # 0.201%), 77 with 0.45, 76 with 0.5 (402/21 0.352% -> 0.209% at 0.4, 0.26% at 0.45-0.5).
    # Fresh seeds 474-485, whole: 576 of 576 within with 0.33 and 0.4 (mean gap 0.0382% ->
    # 0.0386%; 476/31 0.091% -> 0.139%): narrow documents are rare there.
    LONG_PROVE_SHARE = 0.4
    # Groups of the first bound there (`_paths.prove_down`), then twice as many while its
    # time lasts: 256 converged in 0.04-0.2 s of CPU on the long-context suite's cases where
    # the bound was loose, 512 in 0.1-0.65 s (0.3 s is about that time at the default 1 s).
    PROVE_ROWS = 256
    # and at most this many: with more, its LP stops at `ROW_ROUNDS` rounds far from its
    # optimum (1,351 rows cut there at 215,271 on the case above, 1,024 at 226,662).
    PROVE_MOST_ROWS = 1024
    # From this many, the next LP's groups are the last one's with this many split where its
    # duals rise most (`_groups.split`), not twice as many of equal width. On the narrow long
    # contexts (no time limit, each LP from the last one's packs), 512 groups then 128 split a
    # time: 429/7 206,034 on 561 groups (0.24 s of CPU in all), 206,136 on 689 (0.40 s);
    # 1,024 of equal width proved 206,052 on 820 (0.29 s). 438/9: 358,936 on 680 groups, 358,759
    # on 812. With 256 split a time, or 128 with no check of what a split LP may gain
    # (`_paths.prove_down`), the same within the spread on the hard cases (74-76 of 88), and
    # the resumed LPs took the plans' time on fresh seeds. With the check, fresh seeds 498-509:
    # 576 of 576 within (575 before: 501/31 0.228% -> 0.165%), mean gap 0.0454% -> 0.0455%.
    PROVE_SPLIT_FROM = 512
    PROVE_SPLITS = 128
    # Twice the groups, started from the last LP's columns, took 1.2-1.9x the time there
    # (0.05 -> 0.08 -> 0.17 s; 0.12 -> 0.14 -> 0.27 s): a finer LP that would be cut proves
    # little, so it starts only with this many times the last one's time left (2.5 kept
    # L=16,384 depth 16 from its 1,024 groups by 0.01 s: 0.208% above the plan, not 0.148%).
    PROVE_GROWTH = 2.0
    # From LONG_CONTEXT_FROM to LONG_PROVE_BELOW, where the first `_paths.prove_down` (`grouped`)
    # stays below the token bound, it goes on to 512 groups with this many times the first LP's
    # time left: its packs seed the plan's LP (`plan_up`, ``warm``), from 512 groups' far closer
    # (`planners_long_context.py --seed 5` case 18: first LP 116,715 instead of 116,938).
    # With 2.0 the 512 groups ran or not by a few hundredths of a second of load (seed 5 case
    # 18 0.17% or 0.26%); with 1.0 and 2,048 groups for the plan, seed 1 case 40 0.233% -> 0.173%,
    # seed 6 case 2 0.203% -> 0.136% (alone, load 8-9). Not where it reaches the token bound
    # (narrow documents, the bound what is loose): seed 3 case 11 0.149% -> 0.245% there.
    LONG_PROVE_GROWTH = 1.0
    # Of the time the plan leaves there, for finer bounds before finer plans (`_paths.refine`,
    # each LP started from the last one's packs), the rest after them. All of it first left
    # the finer plans no time (long-context suite, L=16,384 depth 4: 190,948 packs on a bound
    # of 190,552 from 1,024 groups, 0.208%); with half, a plan in units of 8 fits (started
    # from the last plan's packs: 0.23 s of CPU, 0.54 s cold): 190,791 on 190,432, 0.189%
    # (before the bound from the plan's duals, `_lift`: 190,651 now).
    PROVE_BEFORE_REFINE = 0.5
    # From this max_length the plan there is seeded with the rounded-down LP's packs and made on
    # a grid of units (whose duals prove a bound, `_lift`) even where that LP proved no more than
    # the simple bounds: on 256 groups it did not on 3 of 16 unseen long-context cases
    # (`planners_long_context.py --cases 32`, cases 26, 27, 29: 0.31%, 0.66%, 0.68% -> 0.22%,
    # 0.14%, 0.26%), and cost case 16 (short documents, L=12,288 depth 8) its balanced groups:
    # 0.18% -> 0.22%. Below, where the suite's plans were tuned (L=2,048-8,192), it changed 3
    # of `tests/packing/optimal_plans.py`'s stored plans (to as few or fewer packs).
    LONG_CONTEXT_FROM = 12288
    # Their shortest and longest lengths present exact: 16 each cost 60 rows and 2x the time
    # of the first LP at L=16,384 depth 16 (0.26 s instead of 0.12 s) for no better bound.
    # Where the depth binds beside the tokens (`_bounds.windows_alone` at least the token bound),
    # a spike at L is a group of its own whatever this is (`_groups.present`): one row; rounded
    # down beside short documents it shared their packs (long-context seed 7 case 2, L=16,384
    # depth 6: 158,237 on 256 groups, 158,683 with it; 158,794 with 30 s). Everywhere, the extra
    # row moved the time of narrow cases' finer LPs (seed 4 case 1: 0.142% -> 0.179%).
    PROVE_ENDS = 0
    # From L=12,288 (`UNITS_FROM`) those groups start at multiples of a unit of tokens, the
    # largest divisor of L up to their width over this (`_units.of_groups`), and their LP is
    # solved in units: pricing's table shrinks by the unit. On the narrow long contexts (session
    # 15, each LP cold): 1,024 groups (widths 12-16) 0.36-0.68 s -> 0.31-0.51 s in units of 2
    # (the same bounds), 0.25-0.39 s in units of 3-4 (the bounds within +-0.07%: the groups
    # move by up to a unit); with a unit of half the width, as fast, and 0.1% less on 256.
    PROVE_UNIT = 4
    # and at most this: the duals of LPs in coarser units lift less over the real lengths (seed
    # 380 case 5, L=16,384 depth 16, 256 groups: 255,831 lifted in units of 1 or 2, 254,973-
    # 255,642 in units of 8, so 380/5 went out: 0.341%), and on 256-512 groups a unit past 2
    # saved little (0.042 -> 0.036 s there). Whole seeds against units up to a quarter of the
    # width: 317-412 with cases out 566 -> 567 of 576, 390-401 574 -> 574; the worst CPU
    # second 1.08 -> 1.05.
    PROVE_UNIT_MOST = 2
    # Of a warm grouped plan's time on a grid (`_paths.plan_up`), kept from its LP for the bound
    # from its duals (`_lift`: one pricing over the real lengths), where an LP bound is the best
    # and no lift proved it yet: cut by the budget before, it proved nothing
    # (`planners_long_context.py --seed 1`, case 5: 378,900 packs on 376,805, 0.556% -> 378,903
    # on 378,360, 0.144%; the bound with 30 s: 378,361). With the pricing over all lengths (0.3-
    # 0.5 s of CPU on 12,000 lengths at L=16,384 depth 8-12) 0.5 was needed (0.3 left it no time,
    # 0.7 cut the LP so early that its duals proved less: 377,326); priced without the depth
    # (0.1-0.2 s there), 0.5 cut the LP before its duals were good on seed 1's case 1 (L=16,384
    # depth 12: 316,520, 317,606 with 0.2 or 0.3), and 0.3 keeps case 5. Not where the token
    # bound is the best: there the plan is what is loose (0.4 of the time cost seed 0's case 26
    # 0.219% -> 0.286%).
    LIFT_SHARE = 0.3
    # and where Martello-Toth's bound is the best too (the lift had only the plan's leftovers
    # there: seed 1's case 1, 318,048 packs on 317,095, 0.301%; the lift proves 317,606: 0.139%).
    LIFT_KINDS = ("lp", "long")
    # Once a plan's lift proved the best bound, a finer plan on long contexts keeps this many times
    # the last lift's time from its LP for its own lift, where the best plan is past the 0.2%
    # target above the bound (`LONG_PROVE_ABOVE`): cut by the budget before, the finer plan
    # proved nothing (long-context seed 12 case 21, L=12,288 depth 8: units of 6, 1,231 rows, the
    # LP converged at 219,107; its lift 218,831, the first plan's 218,669 on 219,113 packs). Its
    # rounding ran 0.007 s past its LP's end there, the lift took 0.035 s: twice the lift's time.
    LIFT_AGAIN = 2.0
    # A lift (`_lift.lifted`) prices its duals interpolated between the groups' lengths; where
    # values this share of the way toward the duals of the group at or below each length may
    # prove the bound that would bring the best plan within the 0.2% target (the best pack
    # found, priced there, leaves room: `_lift` module notes), it prices there too and keeps the
    # better (long49, in-process at 1 s: on the narrow long contexts, lengths near L / 3 that
    # interpolation lets fit too well, the first plan's lift 217,800 -> 220,684 on 16/9,
    # 280,277 -> 280,573 on 303/15, 218,669 -> 218,839 on 12/21; half the way 220,598,
    # 280,460, 218,744).
    LIFT_TOWARD_BELOW = 0.25
    # A lift (`_lift.lifted`) is not priced where the best plan's packs, each bettered by this
    # many moves of one sequence (`_lift._worth`), are worth enough to show it cannot prove
    # more than the best bound: on the narrow long contexts (documents of about L / 3) nearly
    # every lift, each 0.04-0.13 s of CPU; the packs came within 1e-4 of the pricing's best
    # value there (session 15, benchmarks/results/planners_long_context.md).
    LIFT_MOVES = 4
    # and after its first move only this many of them, those worth the most, move on: the best
    # plans hold 10,000-20,000 kinds of pack there, 0.06 s for four moves of them all.
    LIFT_KNOWN = 2048
    # A warm finer plan (`_paths.refine`) starts with this many times the last plan's time left
    # (`PROVE_GROWTH`, 2, before): started from the last plan's packs it takes less than that
    # one (seed 0's case 29, L=12,288 depth 16: 0.5 s left after a 0.3 s plan; its finer plan
    # made 221,694 -> 221,442-221,495 packs on 221,120: 0.260% -> 0.146%-0.170%).
    REFINE_GROWTH = 1.0
    # A finer plan on the same grid of units (`_paths.refine`) only where its groups are this
    # many times the last plan's; else on half the unit. Before, it went on while the grid gave
    # any more (long-context 447/1: 554, 576, 581, 582 rows in units of 6, 4 packs for 0.24 s of
    # CPU, 0.218%; now 554 then 1,661 in units of 3, 0.189%). The 88 hard cases 76 -> 77 of 88
    # (twice); fresh seeds 498-509 mean gap 0.0454% on both (5 closer, 3 further); the main
    # suite's plans the same.
    REFINE_MORE_ROWS = 1.25
    # Where the depth binds, `_units.finer_units` bounds on the finest unit whose LP takes about
    # (rows x the last LP's time per row) x this, within the time left: at L=12,288 depth 8
    # (`planners_long_context.py --seed 3`, case 10) LPs in units of 12, 6, 4, 3 took 0.09,
    # 0.23, 0.41, 0.55 s of CPU (1.0 predicts 0.18, 0.27, 0.36); halving (6, then 3 cut by the
    # budget) proved 69,527 on 69,714 packs (0.27%), units of 4 straight after 12 69,638 (0.11%).
    # At a load of 8 on the 2 cores the LP in units of 4 took 0.39 s or more than the 0.56 s left
    # (1 run in 5, cut: 69,372 stood): 1.2, not 1.0, where a coarser unit is all that fits.
    FINER_GROWTH = 1.2
    GROUP_ROWS = 512  # lengths (groups) of their LPs at most
    TABLE_CELLS = 2 ** 27  # and pricing's table (rows x (depth + 1) x (L + 1)) at most
    UNIT_ROWS = 1024  # rows in units of tokens (`in_units`): pricing stays cheap
    # Max lengths from which groups are in units (or where the table is too big); 16,384 before:
    # at L=12,288 depth 8-16 the table held 640-1,210 balanced groups of single tokens, and the
    # plan lost what rounding up within them loses (`planners_long_context.py --seed 1`, cases
    # 0, 14, 40: 0.277%, 0.206%, 0.457% above the token bound); in units of 12, balanced on a
    # grid of 3 (`fine_grid`): 0.168%, 0.158%, 0.233% (seed 0's case 16: 0.217% -> 0.155%). The
    # suite's L are 512-8,192 and 16,384-65,536: none changes.
    UNITS_FROM = 12288
    GRID_LOSS = 2e-3  # rounding up to the unit loses more (of the token bound's tokens): `fine_grid`
    FINE_ROWS = 4096  # the finer grid's unit: max_length / this tokens
    # Past this (and up to GRID_LOSS), where `prove_down`'s LP stays below the token bound, the
    # plan is on a grid of half the unit (`fine_grid`): long-context seed 0 case 26 (0.171% lost
    # in units of 16): 0.219% -> 0.180% above the bound. Where that LP reaches it, the unit stays
    # (seed 0 cases 5 and 9, 0.152-0.154% lost: 0.08% -> 0.31% and 0.035% -> 0.125% on the half
    # grid, the lift from the unit's grid lost).
    HALF_GRID_LOSS = 1.5e-3
    # That grid's plan has UNIT_ROWS balanced groups, on long contexts too. Up to 2,048 there
    # (sessions 12-18: seed 5 case 18 0.211% -> 0.171%, seed 0 case 16 0.153% -> 0.095%) their
    # LP's first solve alone took 0.3-0.5 s of a slower CPU (session 19), and cut, its plan was
    # best fit's: fresh seeds 554-560 at 1 s, 308 -> 311 of 336 within, mean gap 0.159% ->
    # 0.087% (559/32 5.83% -> 0.17%, 560/22 9.74% -> 0.19%); at 1.5 s, 191 -> 192 of 192
    # (554-557; 14 cases 0.02-0.06 pp further, 7 closer). `_paths.refine` goes finer with the time
    # left. Where the depth binds beside the tokens (`_paths.prove_down`'s LP above the
    # token bound, and so `_bounds.windows_alone`), a grid with more groups is regrouped to this
    # many: rounding up within groups loses less there, and the plan's LP must converge.
    DEPTH_FINE_ROWS = 1024
    # and where the sequences shorter than L are this share of the slots their tokens need or
    # more (`_bounds.slots_share`: the depth nearly binds), whatever `prove_down`'s LP proved:
    # there the plan's LP on up to 2,048 groups was cut by the budget after 6-7 rounds (long48;
    # in-process, 1 s, 1,024 groups / 2,048: seed 15 case 4, depth 6, 0.891 of the
    # slots, 0.165% / 0.202%; fresh 305/2, depth 6, 0.878: 0.174% / 0.215%; 13/12, depth 8,
    # 0.853: 0.113% / 0.108%), while further from it 1,024 groups lost (seed 5 case 18 at 0.780:
    # 0.154% / 0.111%; 0/16 at 0.616: 0.145% / 0.079%; 1/40 at 0.610: 0.194% / 0.143%).
    DEPTH_NEAR = 0.85

    # --- The LP over all lengths, last (`optimal`) ---
    # Skipped with less time left than LAST_LP_SECONDS where there are more than
    # LAST_LP_LENGTHS lengths: its seeds and first solve ran to their end past the budget
    # (L=65,536 log-normal depth 4: started 0.01 s before the end of 1 s, ended at 2.0 s
    # with no better plan; 0.07 s before: 1.7 s). With fewer (log-normal L=2,048, 1,995
    # lengths) it improves the plan in that time. Once the other paths were compiled and
    # faster, it started with 0.3-0.7 s left on the nine suite cases above 8,192 lengths
    # and never improved a plan there (it is stopped by the budget now): 1 s, so the
    # default budget never starts it (uniform L=32,768 depth 2: 1.02 -> 0.25 s CPU,
    # windows L=32,768: 1.06 -> 0.43 s, same plans).
    LAST_LP_SECONDS = 1.0
    LAST_LP_LENGTHS = 4 * MANY_LENGTHS
