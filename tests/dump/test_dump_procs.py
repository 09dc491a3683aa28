"""Processes: forked DataLoader workers dump nothing (the parent's files stay
whole and hold no record of the collate calls); two spawned ranks
each write their own rank dir, with the collective's input and result."""
import os
import sys
import unittest

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dumptest as dt  # noqa: E402


class Processes(dt.ShimCase):
    def test_forked_dataloader_workers_write_nothing(self):
        cfg = self.write_config(dt.config("./w0", steps="all"))
        self.train(["--steps", "3", "--workers", "0"], cfg)
        cfg2 = self.write_config(dt.config("./w2", steps="all"), "w2.json")
        p = self.train(["--steps", "3", "--workers", "2", "--print-losses"], cfg2)
        plain = self.train(["--steps", "3", "--workers", "2", "--print-losses"], preload=False)
        self.assertEqual(dt.losses(p.stdout), dt.losses(plain.stdout))
        self.assertNotIn("msprobe:", p.stderr)
        f0, f2 = dt.dump_files(self.path("w0")), dt.dump_files(self.path("w2"))
        self.assertEqual(sorted(f2), [(0, 0), (1, 0), (2, 0)])
        # the dump root holds the steps and this process's claim on its rank dir name
        self.assertEqual(sorted(os.listdir(self.path("w2"))),
                         [".rank0.owner", "step0", "step1", "step2"])
        for step in range(3):
            n0 = set(dt.read_dump(f0[(step, 0)])[0])
            n2 = set(dt.read_dump(f2[(step, 0)])[0])
            # loading indexes the dataset (Tensor.__getitem__) and collates
            # (torch.stack): not dumped, whether it runs in forked workers or
            # in-process, and the model's records are the same either way
            loading = ("Torch.stack", "Tensor.__getitem__")
            self.assertFalse(any(n.startswith(loading) for n in n0), sorted(n0))
            self.assertFalse(any(n.startswith(loading) for n in n2), sorted(n2))
            self.assertIn("Functional.conv2d.0.forward", n0)
            self.assertEqual(n0, n2)

    def test_spawned_dataloader_workers_write_nothing(self):
        # spawn workers are fresh Pythons that boot the shim on their own
        cfg = self.write_config(dt.config("./s", steps="all"))
        p = self.train(["--steps", "2", "--workers", "2", "--spawn-workers", "--print-losses"], cfg)
        plain = self.train(["--steps", "2", "--workers", "2", "--spawn-workers", "--print-losses"],
                           preload=False)
        self.assertEqual(dt.losses(p.stdout), dt.losses(plain.stdout))
        self.assertNotIn("msprobe:", p.stderr)
        files = dt.dump_files(self.path("s"))
        self.assertEqual(sorted(files), [(0, 0), (1, 0)])
        for f in files.values():
            names = set(dt.read_dump(f)[0])
            self.assertIn("Functional.conv2d.1.backward", names)
            self.assertFalse(any(n.startswith(("Torch.stack", "Tensor.__getitem__")) for n in names))

    def test_rank_from_environment(self):
        lst = [("torch.nn.functional.conv2d", "forward")]
        cfg = self.write_config(dt.config("./e", steps="0", api_list=lst))
        self.train(["--steps", "1"], cfg, env_extra={"RANK": "3", "WORLD_SIZE": "4"})
        cfg = self.write_config(dt.config("./l", steps="0", api_list=lst), "l.json")
        self.train(["--steps", "1"], cfg, env_extra={"LOCAL_RANK": "1"})
        files = dt.dump_files(self.path("e"))
        self.assertEqual(sorted(files), [(0, 3)])
        _, root = dt.read_dump(files[(0, 3)])
        self.assertEqual((int(root["rank"]), int(root["world_size"])), (3, 4))
        self.assertEqual(sorted(dt.dump_files(self.path("l"))), [(0, 1)])

    def test_two_spawned_ranks_write_their_own_dirs(self):
        cfg = self.write_config(dt.config("./r", steps="all", api_list=[
            ("torch.distributed.all_reduce", "forward"), ("torch.nn.functional.linear", "all")]))
        script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ddp_train.py")
        p = self.run_cmd([dt.PYTHON, script], cfg)
        self.assertEqual(p.returncode, 0, p.stderr)
        files = dt.dump_files(self.path("r"))
        self.assertEqual(sorted(files), [(0, 0), (0, 1), (1, 0), (1, 1)])
        for (step, rank), path in files.items():
            recs, root = dt.read_dump(path)
            self.assertEqual((int(root["rank"]), int(root["world_size"])), (rank, 2))
            self.assertEqual(set(recs), {"Functional.linear.0.forward", "Functional.linear.0.backward",
                                         "Distributed.all_reduce.0.forward",
                                         "Distributed.all_reduce.1.forward"})
            x = recs["Functional.linear.0.forward"]["input.0"]
            self.assertTrue(np.array_equal(x, np.full((3, 4), rank + 1.0, np.float32)))
            # weight grad of sum(W x + b) over 3 rows of (rank+1): 3 * (rank+1);
            # after all_reduce: 3 * 1 + 3 * 2 = 9
            ar = recs["Distributed.all_reduce.0.forward"]
            self.assertTrue(np.array_equal(ar["input.0"], np.full((2, 4), 3.0 * (rank + 1), np.float32)))
            self.assertTrue(np.array_equal(ar["output.0"], np.full((2, 4), 9.0, np.float32)))


if __name__ == "__main__":
    unittest.main()
