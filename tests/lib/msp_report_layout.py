"""The layout of msprobe compare's result.xlsx / result.csv as msprobe-compare(1)
documents it: the header row of each sheet and the two highlight fills. The
report tests check what msprobe writes against these, so they are spelled out
here by hand, not taken from msprobe's sources."""

SUMMARY_HEADER = ["Step", "Rank", "Name", "Bench Name", "Order", "Worst Output Cosine",
                  "Worst Output MaxAbsErr", "Accuracy Reached or Not", "Error Origin",
                  "Root Cause", "Details", "Result", "Replay", "Replay Error", "Replay Bound",
                  "Changed Argument", "Reason"]
# details sheets and result.csv of a tensor dump
TENSOR_HEADER = ["NPU Name", "Bench Name", "NPU Dtype", "Bench Dtype", "NPU Tensor Shape",
                 "Bench Tensor Shape", "Cosine", "EucDist", "MaxAbsErr", "MaxRelativeErr",
                 "One Thousandth Err Ratio", "Five Thousandths Err Ratio", "NPU max",
                 "NPU min", "NPU mean", "NPU l2norm", "Bench max", "Bench min", "Bench mean",
                 "Bench l2norm", "Accuracy Reached or Not", "Result", "Err_message",
                 "Error Origin", "Step", "Rank", "NPU Requires_grad", "Bench Requires_grad",
                 "Requires_grad Consistent", "NPU_Stack_Info", "Data_name", "NPU MD5",
                 "BENCH MD5"]
# details sheets of a statistics dump
STATS_HEADER = ["NPU Name", "Bench Name", "NPU Dtype", "Bench Dtype", "NPU Tensor Shape",
                "Bench Tensor Shape", "Max diff", "Min diff", "Mean diff", "L2norm diff",
                "MaxRelativeErr", "MinRelativeErr", "MeanRelativeErr", "NormRelativeErr",
                "NPU max", "NPU min", "NPU mean", "NPU l2norm", "Bench max", "Bench min",
                "Bench mean", "Bench l2norm", "Accuracy Reached or Not", "Result",
                "Err_message", "Error Origin", "Step", "Rank", "NPU Requires_grad",
                "Bench Requires_grad", "Requires_grad Consistent", "NPU_Stack_Info",
                "Data_name", "NPU MD5", "BENCH MD5"]
# openpyxl's ARGB of Excel's "Bad" (#FFC7CE) and "Neutral" (#FFEB9C) fills
RED, YELLOW = "FFFFC7CE", "FFFFEB9C"
