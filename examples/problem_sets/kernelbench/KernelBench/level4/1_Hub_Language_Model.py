import torch
from transformers import AutoConfig, AutoModelForCausalLM


class Model(torch.nn.Module):
    """
    A language model whose weights come from the Hugging Face hub.
    """

    def __init__(self, model_name, config):
        super().__init__()
        self.model = AutoModelForCausalLM.from_pretrained(model_name, config=config)

    def forward(self, x):
        return self.model(x).logits


model_name = "an-example/tiny-model"
config = AutoConfig.from_pretrained(model_name)
batch_size = 1
sequence_length = 128


def get_inputs():
    return [torch.randint(0, config.vocab_size, (batch_size, sequence_length))]


def get_init_inputs():
    return [model_name, config]
