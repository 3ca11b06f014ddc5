// placeholder: implementation lands with issue 2
