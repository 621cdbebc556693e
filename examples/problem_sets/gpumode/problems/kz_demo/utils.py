import torch


def set_seed(seed=42):
    torch.manual_seed(seed)


@torch.no_grad()
def verbose_allclose(received, expected, rtol=1e-05, atol=1e-08, max_print=5):
    if received.shape != expected.shape:
        return ["SIZE MISMATCH"]
    diff = torch.abs(received - expected)
    mismatched = diff > atol + rtol * torch.abs(expected)
    count = int(mismatched.count_nonzero().item())
    if count:
        return [f"Number of mismatched elements: {count}"]
    return []


def match_reference(data, output, reference, rtol=1e-05, atol=1e-08):
    expected = reference(data)
    reasons = verbose_allclose(output, expected, rtol=rtol, atol=atol)
    if reasons:
        return False, "mismatch found! " + " ".join(reasons)
    return True, ""


def make_match_reference(reference, **kwargs):
    def wrapped(data, output):
        return match_reference(data, output, reference=reference, **kwargs)

    return wrapped
