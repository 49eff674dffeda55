import argparse, os
import torch
import torch.distributed as dist

p = argparse.ArgumentParser()
p.add_argument("--log_dir")
a = p.parse_args()
dist.init_process_group("nccl")
rank = dist.get_rank()
torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(64, 1).cuda())
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x, y = torch.randn(512, 64, device="cuda"), torch.randn(512, 1, device="cuda")
for epoch in range(5):
    loss = torch.nn.functional.mse_loss(model(x), y)
    opt.zero_grad(); loss.backward(); opt.step()
    print(f"epoch {epoch + 1}/5 loss {loss.item():.4f}", flush=True)
os.makedirs(a.log_dir, exist_ok=True)
with open(os.path.join(a.log_dir, "done.txt"), "w") as f:
    f.write(f"rank {rank} cwd {os.getcwd()} file {os.path.abspath(__file__)} device {torch.cuda.get_device_name(0)}\n")
print("cwd", os.getcwd(), "file", os.path.abspath(__file__), flush=True)
dist.destroy_process_group()
