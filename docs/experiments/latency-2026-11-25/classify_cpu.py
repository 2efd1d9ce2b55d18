"""CPU time of one DemoService.classify call (thread_time, so other load on the machine does not count)."""
import statistics, sys, time, torch
torch.set_num_threads(1)
from demo.serving import DemoService
from demo.views.sentiment import classify
s = DemoService("checkpoints", device="cpu")
review = ("The acting was wooden and the plot made no sense, but the music was lovely and I still "
          "smiled at the end. Not a great film, not a terrible one either; worth a rainy afternoon.")
for _ in range(5): classify(s, review)
for rnd in range(3):
    ts = []
    for _ in range(40):
        t = time.thread_time(); classify(s, review); ts.append(time.thread_time() - t)
    print(sys.argv[1], "round", rnd, "median ms %.1f" % (1000 * statistics.median(ts)), flush=True)
