"""The torchvision models the nn tests export (random weights, seeded; BatchNorm statistics randomised
so folding matters). Imported by nn_torchvision.py (full-size models vs PyTorch) and nn_families.py
(one model per family, every export variant, vs PyTorch and ONNX Runtime).

Where a family's smallest torchvision model is heavy for CI, the same class is built narrower or
shallower (the ops are what the tests are about); FAMILY_MODELS says which.
"""
import torch
import torchvision


def randomize_bn(model, gen):
    for m in model.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            c = m.num_features
            m.weight.data = torch.rand(c, generator=gen) + 0.5
            m.bias.data = torch.randn(c, generator=gen) * 0.1
            m.running_mean = torch.randn(c, generator=gen) * 0.1
            m.running_var = torch.rand(c, generator=gen) + 0.5


def _narrow_classifier(model, width):
    # alexnet/vgg: the same Linear/ReLU/Dropout ops as their 100M-parameter classifiers, at a size CI holds
    model.classifier = torch.nn.Sequential(torch.nn.Dropout(), torch.nn.Linear(width, 128), torch.nn.ReLU(True),
                                           torch.nn.Dropout(), torch.nn.Linear(128, 10))


def build(name, gen):
    """The model called `name`, in eval mode, with seeded random weights."""
    torch.manual_seed(1)
    if name == "vit_small":  # ViT-B/16's ops (patch conv, class token, LayerNorm, attention, GELU), 3 narrow layers
        from torchvision.models.vision_transformer import VisionTransformer
        model = VisionTransformer(image_size=224, patch_size=16, num_layers=3, num_heads=4, hidden_dim=96, mlp_dim=192,
                                  num_classes=10)
        # its zero-initialised head randomised so the logits mean something
        model.heads.head.weight.data = torch.randn(model.heads.head.weight.shape, generator=gen) * 0.2
        model.heads.head.bias.data = torch.randn(model.heads.head.bias.shape, generator=gen) * 0.1
    elif name == "swin_small_cfg":  # shifted windows, masks from shape arithmetic, roll, patch merging; 2 stages
        from torchvision.models.swin_transformer import SwinTransformer
        model = SwinTransformer(patch_size=[4, 4], embed_dim=32, depths=[2, 2], num_heads=[2, 4], window_size=[7, 7],
                                num_classes=10)
        model.head.weight.data = torch.randn(model.head.weight.shape, generator=gen) * 0.5  # logits of size ~1
    elif name == "convnext_small_cfg":  # LayerNorm over channels after permutes, 7x7 depthwise, layer scale; 2 stages
        from torchvision.models.convnext import CNBlockConfig, ConvNeXt
        model = ConvNeXt([CNBlockConfig(32, 64, 2), CNBlockConfig(64, None, 2)], layer_scale=0.5)
    elif name == "maxvit_small_cfg":  # MBConv + block and grid attention (Einsum), relative position bias; 2 stages
        from torchvision.models.maxvit import MaxVit
        model = MaxVit(input_size=(224, 224), stem_channels=16, partition_size=7, block_channels=[32, 64],
                       block_layers=[1, 1], head_dim=16, stochastic_depth_prob=0.0, num_classes=10)
        model.classifier[-1].weight.data = torch.randn(model.classifier[-1].weight.shape, generator=gen)  # logits ~1
    elif name == "densenet_small_cfg":  # DenseNet-121's ops with a concat of 21 inputs, growth rate 8
        from torchvision.models.densenet import DenseNet
        model = DenseNet(growth_rate=8, block_config=(2, 2, 20, 2), num_init_features=16, bn_size=2, num_classes=10)
    elif name == "efficientnet_v2_small_cfg":  # EfficientNetV2-S's stages (Fused-MBConv, MBConv, SE), 1 layer each
        from torchvision.models import efficientnet
        settings, last = efficientnet._efficientnet_conf("efficientnet_v2_s")
        for s in settings:
            s.num_layers = 1
        model = efficientnet.EfficientNet(settings, dropout=0.2, last_channel=last, num_classes=10,
                                          norm_layer=torch.nn.BatchNorm2d)
    elif name == "resnext_small_cfg":  # ResNeXt-50 32x4d's grouped bottlenecks, one block per stage
        from torchvision.models.resnet import Bottleneck, ResNet
        model = ResNet(Bottleneck, [1, 1, 1, 1], groups=32, width_per_group=4, num_classes=10)
    elif name in ("alexnet", "vgg11_bn"):
        model = getattr(torchvision.models, name)(weights=None)
        _narrow_classifier(model, 256 * 6 * 6 if name == "alexnet" else 512 * 7 * 7)
    else:
        model = getattr(torchvision.models, name)(weights=None)
    model.eval()
    randomize_bn(model, gen)
    if name == "inception_v3":  # its default init grows activations to ~1e13 over 94 convs: keep them O(1)
        for mod in model.modules():
            if isinstance(mod, torch.nn.Conv2d):
                fan_in = mod.weight[0].numel()
                mod.weight.data = torch.randn(mod.weight.shape, generator=gen) * (1.0 / fan_in) ** 0.5
    return model


# family -> (model, input size): one per torchvision 0.14 classification family
FAMILY_MODELS = {
    "alexnet": ("alexnet", 224),
    "convnext": ("convnext_small_cfg", 224),
    "densenet": ("densenet_small_cfg", 224),
    "efficientnet": ("efficientnet_b0", 224),
    "efficientnet_v2": ("efficientnet_v2_small_cfg", 224),
    "googlenet": ("googlenet", 224),
    "inception_v3": ("inception_v3", 299),
    "maxvit": ("maxvit_small_cfg", 224),
    "mnasnet": ("mnasnet0_5", 224),
    "mobilenet_v2": ("mobilenet_v2", 224),
    "mobilenet_v3": ("mobilenet_v3_small", 224),
    "regnet": ("regnet_y_400mf", 224),
    "resnet": ("resnet18", 224),
    "resnext": ("resnext_small_cfg", 224),
    "shufflenet_v2": ("shufflenet_v2_x0_5", 224),
    "squeezenet": ("squeezenet1_1", 224),
    "swin": ("swin_small_cfg", 224),
    "vgg": ("vgg11_bn", 224),
    "vit": ("vit_small", 224),
}
