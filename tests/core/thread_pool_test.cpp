// placeholder: tests land with issue 2
